// Which kind of pre-started interpreter a program is handed (supervisor/sandbox/prestart.cc): a
// preloaded one when its text names a preloaded module's top-level package as a whole word.
#include <gtest/gtest.h>

#include "supervisor/sandbox/live_sandbox.h"

namespace airlock::sandbox {
namespace {

const std::vector<std::string> kPreload = {"pandas", "matplotlib.pyplot", "@scope/pkg/sub",
                                           "lodash/fp"};

TEST(PrestartChoice, ProgramsNamingAPreloadedPackageWantIt) {
  EXPECT_TRUE(wantsPreload("import pandas as pd", kPreload));
  EXPECT_TRUE(wantsPreload("from pandas.io import json", kPreload));
  EXPECT_TRUE(wantsPreload("import matplotlib\nmatplotlib.use('Agg')", kPreload));
  EXPECT_TRUE(wantsPreload("pandas", kPreload));
  EXPECT_TRUE(wantsPreload("const x = require('@scope/pkg')", kPreload));
  EXPECT_TRUE(wantsPreload("import _ from \"lodash\";", kPreload));
}

TEST(PrestartChoice, OtherProgramsDoNot) {
  EXPECT_FALSE(wantsPreload("print(1)", kPreload));
  EXPECT_FALSE(wantsPreload("import pandas_helper", kPreload));
  EXPECT_FALSE(wantsPreload("mypandas = 1", kPreload));
  EXPECT_FALSE(wantsPreload("require('@scope/other')", kPreload));
  EXPECT_FALSE(wantsPreload("", kPreload));
  EXPECT_FALSE(wantsPreload("import pandas", {}));
}

}  // namespace
}  // namespace airlock::sandbox
