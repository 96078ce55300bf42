from ferret.job_ids import binds, is_ferret_job_id, job_id_for


def test_derived_ids_bind_to_their_namespace_and_request_id():
    job_id = job_id_for("tenant-a", "r1")
    assert job_id == job_id_for("tenant-a", "r1") and is_ferret_job_id(job_id)
    assert binds(job_id, "tenant-a", "r1")
    assert not binds(job_id, "tenant-b", "r1") and not binds(job_id, "tenant-a", "r2")
    assert not binds(job_id, "tenant-a", None), "a derived id is not a random one"


def test_random_ids_bind_only_to_requests_without_a_request_id():
    job_id = job_id_for("tenant-a", None)
    assert job_id != job_id_for("tenant-a", None) and job_id.startswith("fr-r-")
    assert binds(job_id, "any", None) and not binds(job_id, "tenant-a", "r1")
    assert not binds("fr-r-not-hex", "any", None) and not binds("rq-uuid", "any", None)
