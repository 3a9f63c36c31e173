"""Ctrl-C or SIGTERM while the command is still loading: exit 2 and one line, never a traceback.

The signal is sent by the process to itself at the moment a given module starts to be imported (an
import hook), on the real entry point (`python -m pg_claimcheck`, run by runpy as the console script
runs it), so the moment is exact on a loaded machine too. No server: nothing has connected yet."""
import signal
import subprocess
import sys

import pytest

TRIP = """
import os, runpy, signal, sys
module, signum = sys.argv[1], getattr(signal, sys.argv[2])

class Trip:
    def find_spec(self, name, path=None, target=None):
        if name == module:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signum)  # handled at the next bytecode: inside this import
        return None

sys.meta_path.insert(0, Trip())
sys.argv = ["claimcheck", "check", "skip-locked", "--jobs", "10"]
runpy.run_module("pg_claimcheck", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("module", [
    "importlib.metadata",  # the package's version, once read by `import pg_claimcheck` before any handler
    "pg_claimcheck.cli",
    "psycopg",
    "rich.console",
])
def test_an_interrupt_while_loading_exits_2_in_one_line(module, signame, tmp_path):
    done = subprocess.run([sys.executable, "-c", TRIP, module, signame], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "CLAIMCHECK_DSN": "postgresql:///x"})
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, done.stderr
    assert done.stderr == "claimcheck: interrupted before anything ran; nothing of this run was left to clean up.\n"


def test_an_ignored_sigint_stays_ignored_while_loading(tmp_path):
    # Started in the background of a script (`cmd &`), SIGINT is ignored: the command keeps it so.
    done = subprocess.run([sys.executable, "-c", TRIP, "pg_claimcheck.cli", "SIGINT"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "CLAIMCHECK_DSN": "postgresql://x@127.0.0.1:1/x"},
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert "interrupted" not in done.stderr and done.returncode == 2, done.stderr  # it ran on: no server there
    assert "Traceback" not in done.stderr, done.stderr


STRING_EXEC_TRIP = """
import os, signal, sys

class Trip:
    def find_spec(self, name, path=None, target=None):
        if name == "pg_claimcheck.locust.engine":  # imported by `check --engine locust` once main() cleans up
            sys.meta_path.remove(self)
            # Raised inside a string exec, as inside a dataclass's generated method.
            exec("os.kill(os.getpid(), signal.SIGTERM)\\nx = 1", {"os": os, "signal": signal})
        return None

sys.meta_path.insert(0, Trip())
"""


def test_an_interrupt_inside_a_string_exec_still_exits_2_under_python_m(tmp_path):
    # CPython notes a KeyboardInterrupt that ends a string exec as unhandled, even once caught, and under
    # `python -m` turned our exit 2 into death by SIGINT (-2): 1 of 12 signalled `lib` runs of the fuzz.
    (tmp_path / "sitecustomize.py").write_text(STRING_EXEC_TRIP)
    done = subprocess.run([sys.executable, "-m", "pg_claimcheck", "check", "skip-locked", "--engine", "locust"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path),
                               "CLAIMCHECK_DSN": "postgresql://x@127.0.0.1:1/x"})
    assert done.stderr == "claimcheck: interrupted; nothing of this run was left to clean up.\n", done.stderr
    assert done.returncode == 2
