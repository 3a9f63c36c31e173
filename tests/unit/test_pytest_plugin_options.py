"""The plugin finds its server the way the docs say: flag, then $CLAIMCHECK_DSN, then the ini key."""
import pytest

from pg_claimcheck.pytest_plugin import DSN_DEST, DSN_ENV, DSN_INI, configured_dsn


class Config:
    def __init__(self, flag=None, ini=None):
        self.flag, self.ini = flag, ini

    def getoption(self, name):
        assert name == DSN_DEST
        return self.flag

    def getini(self, name):
        assert name == DSN_INI
        return self.ini


@pytest.mark.parametrize("flag,env,ini,expected", [
    ("postgresql://flag", "postgresql://env", "postgresql://ini", "postgresql://flag"),
    (None, "postgresql://env", "postgresql://ini", "postgresql://env"),
    (None, None, "postgresql://ini", "postgresql://ini"),
    (None, None, "", None),  # nothing configured: the fixture starts an embedded server
])
def test_dsn_precedence(monkeypatch, flag, env, ini, expected):
    if env:
        monkeypatch.setenv(DSN_ENV, env)
    else:
        monkeypatch.delenv(DSN_ENV, raising=False)
    assert configured_dsn(Config(flag, ini)) == expected
