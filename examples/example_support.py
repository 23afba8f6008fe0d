"""What the SDK examples share: the SDK from this checkout when it is not installed, the common
command line (--out, --profile), and one way to fail (a message and exit status 1).

The examples find the supervisor through AIRLOCK_URL (and AIRLOCK_TOKEN for TCP), like every
airlock client; unset, they use unix:///run/airlock/airlock.sock.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent
REPO = EXAMPLES.parent

try:
    import airlock  # noqa: F401  (installed: pip install ./sdk/python)
except ImportError:
    sys.path.insert(0, str(REPO / "sdk" / "python" / "src"))
    import airlock  # noqa: F401


class ExampleFailed(Exception):
    """The example ran but its result is wrong or missing."""


def arguments(description: str,
              add: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, default=Path("out"),
                        help="directory for the files this example produces (default: ./out)")
    parser.add_argument("--profile", default=None,
                        help="policy profile of the sandbox (default: the policy's default; "
                             "pandas and matplotlib want ~1 GiB, see "
                             "policy/examples/data-science.toml)")
    if add is not None:
        add(parser)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    return args


def check(execution: airlock.Execution, step: str) -> airlock.Execution:
    """The execution, or ExampleFailed with the sandbox's traceback when the code raised."""
    if execution.error is not None:
        raise ExampleFailed(f"{step}: the code raised {execution.error.name}: "
                            f"{execution.error.value}\n{execution.error.traceback}")
    return execution


def main(body: Callable[[], None]) -> None:
    """Runs the example; exit status 0 on success, 1 with the reason on stderr otherwise."""
    name = Path(sys.argv[0]).name
    try:
        body()
    except airlock.AirlockError as e:
        print(f"{name}: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
    except ExampleFailed as e:
        print(f"{name}: {e}", file=sys.stderr)
        sys.exit(1)
