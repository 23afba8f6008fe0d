# The plugin ABI guard: header hash per ABI version, struct layout.
airlock_add_test(abi_tests LABEL unit SOURCES abi_version_test.cc LIBS airlock::sdk)
