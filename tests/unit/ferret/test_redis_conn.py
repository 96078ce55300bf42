import pytest

from ferret.redis_conn import redacted


@pytest.mark.parametrize(("url", "shown"), [
    ("redis://user:secret@host:6379/0", "redis://user:***@host:6379/0"),
    ("redis://:secret@host/0", "redis://:***@host/0"),
    ("redis://user@host/0?password=secret", "redis://***@host/0?password=***"),
    ("rediss://host/0?db=1&password=secret&ssl_cert_reqs=none", "rediss://host/0?db=1&password=***&ssl_cert_reqs=none"),
    ("unix:///run/redis.sock?password=secret&db=2", "unix:///run/redis.sock?password=***&db=2"),
    ("redis://host:6379/0", "redis://host:6379/0"),
    ("user:secret@host", "<unparsable URL>"),
])
def test_no_form_of_a_password_is_shown(url, shown):
    assert redacted(url) == shown and "secret" not in redacted(url)
