"""Passwords never survive scrub(): in URIs, key=value DSNs, unparsable DSNs and reports."""
import string

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pg_claimcheck.server.redaction import redact_dsn, remember, scrub, scrub_all, split_password

SAFE = string.ascii_letters + string.digits + "!$()*+,-.;<>?[]^_`|~:="


@pytest.mark.parametrize("dsn,shown", [
    ("postgresql://bob:Sekr1t@db.example:5432/app", "postgresql://bob:***@db.example:5432/app"),
    ("host=db password=Sekr1t user=bob", "host=db password=*** user=bob"),
    ("postgresql://bob:Sekr1t@[::1:5432/app", "postgresql://bob:***@[::1:5432/app"),  # libpq cannot parse it
    ("postgresql://bob@db/app?password=Sekr1t&sslmode=require", "postgresql://bob@db/app?password=***&sslmode=require"),
])
def test_scrub_hides_the_password(dsn, shown):
    remember(dsn)
    assert scrub(f"cannot connect to {dsn}: refused") == f"cannot connect to {shown}: refused"
    assert "Sekr1t" not in redact_dsn(dsn)


def test_a_common_word_password_keeps_report_keys_and_urls_readable():
    remember("postgresql://admin:postgres@h/db")
    doc = scrub_all({"postgres": {"version": "15"}, "settings": {"dsn": "postgresql://admin:postgres@h/db"}})
    assert doc == {"postgres": {"version": "15"}, "settings": {"dsn": "postgresql://admin:***@h/db"}}


def test_split_password_for_a_child_process():
    conninfo, password = split_password("postgresql://bob:Sekr1t@db:5432/app")
    assert password == "Sekr1t" and "Sekr1t" not in conninfo and "host=db" in conninfo
    assert split_password("host=db user=bob")[1] is None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=SAFE, min_size=3, max_size=30), st.sampled_from(["uri", "kv", "quoted"]))
def test_no_password_survives(password, form):
    assume(password not in "error at postgresql://u:@h:5432/d host=h password= user=u dbname=d port=5432 ***")
    dsn = {"uri": f"postgresql://u:{password}@h:5432/d",
           "kv": f"host=h password={password} user=u" if "=" not in password else "host=h user=u",
           "quoted": "host=h password='" + password.replace("\\", "\\\\").replace("'", "\\'") + "' user=u"}[form]
    remember(dsn)
    if password in dsn:
        assert password not in scrub(f"error at {dsn}")
        assert password not in redact_dsn(dsn)


@pytest.mark.parametrize("dsn", ["host=127.0.0.1 password='Xyz123 secret port=5499",
                                 "host=127.0.0.1 password = 'Xyz123 secret",
                                 "host=h sslpassword='Xyz123 secret user=u"])
def test_a_password_whose_quote_is_never_closed_is_hidden(dsn):
    # libpq refuses the DSN (unterminated quoted string), and its message used to show the password.
    message = f"cannot connect to PostgreSQL at {dsn}: unterminated quoted string in connection info string"
    assert "Xyz123" not in scrub(message) and "secret" not in scrub(message)  # not even remembered
    remember(dsn)
    shown = scrub(message)
    assert "Xyz123" not in shown and "secret" not in shown
    assert shown.endswith(": unterminated quoted string in connection info string")  # libpq's reason stays
