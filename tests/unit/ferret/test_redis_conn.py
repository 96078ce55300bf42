import pytest
import redis
from redis.sentinel import MasterNotFoundError

from ferret.errors import ConfigError, RedisUnreachable
from ferret.redis_plumbing.redis_conn import client_for, parse_cluster_url, parse_sentinel_url, reason, redacted
from tests.conftest import free_port


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


@pytest.mark.parametrize(("url", "shown"), [
    ("redis+sentinel://:secret@h1:26379,h2:26380/ferret/2", "redis+sentinel://:***@h1:26379,h2:26380/ferret/2"),
    ("rediss+sentinel://u:secret@h1:26379/ferret?sentinel_password=secret",
     "rediss+sentinel://u:***@h1:26379/ferret?sentinel_password=***"),
])
def test_sentinel_urls_are_redacted_too(url, shown):
    assert redacted(url) == shown


def test_a_sentinel_url_names_sentinels_service_and_db():
    address = parse_sentinel_url("rediss+sentinel://app:p%40ss@10.0.0.1:26379,[::1]:26380/ferret/3"
                                 "?sentinel_password=s")
    assert address.sentinels == (("10.0.0.1", 26379), ("::1", 26380))
    assert (address.service, address.db, address.username, address.password) == ("ferret", 3, "app", "p@ss")
    assert address.sentinel_password == "s" and address.ssl


@pytest.mark.parametrize(("url", "names"), [
    ("redis+sentinel:///ferret", "no sentinel"),
    ("redis+sentinel://h1/ferret", "not host:port"),
    ("redis+sentinel://h1:26379/", "no service name"),
    ("redis+sentinel://h1:26379/ferret/x", "db 'x'"),
    ("redis+sentinel://:secret@h1:26379/ferret?socket_timeout=1", "unknown parameter"),
    ("redis+cluster://", "no cluster node"),
    ("redis+cluster://:secret@h1", "not host:port"),
    ("redis+cluster://:secret@h1:7000/3", "only db 0"),
    ("redis+cluster://:secret@h1:7000?socket_timeout=1", "no parameters"),
])
def test_a_bad_sentinel_or_cluster_url_says_what_is_wrong_without_the_password(url, names):
    with pytest.raises(ConfigError, match=names) as caught:
        client_for(url)
    assert "secret" not in str(caught.value)


def test_no_primary_found_is_said_in_a_line_not_as_the_sentinels_repr():
    error = MasterNotFoundError("No master found for 'ferret' : <redis.client.Redis(<ConnectionPool(...password=x)>)>")
    assert reason(error) == "no sentinel named a primary for service 'ferret' (none answered, or none knows it)"
    assert reason(redis.ConnectionError("refused")) == "refused"


def test_a_cluster_url_names_its_nodes_and_is_redacted():
    address = parse_cluster_url("rediss+cluster://app:p%40ss@10.0.0.1:7000,[::1]:7001")
    assert address.nodes == (("10.0.0.1", 7000), ("::1", 7001))
    assert (address.username, address.password, address.ssl) == ("app", "p@ss", True)
    assert redacted("redis+cluster://:secret@h1:7000,h2:7001") == "redis+cluster://:***@h1:7000,h2:7001"


def test_an_unreachable_cluster_is_one_line_without_the_password():
    with pytest.raises(RedisUnreachable, match="cannot reach the Redis Cluster at") as caught:
        client_for(f"redis+cluster://:secret@127.0.0.1:{free_port()}")
    assert "secret" not in str(caught.value) and "\n" not in str(caught.value)
