"""POST .../conversations?async=true answers 202 with a job at once; a worker of the server applies it; GET .../jobs/{id}."""
from __future__ import annotations

from .conftest import KEY_A, KEY_B, auth, conversation


def wait_job(client, memory, job: dict, key: str = KEY_A) -> dict:
    """The job as GET answers it once the server's worker has finished it (waited on, however long it takes)."""
    memory.wait(job["id"], timeout=None)
    r = client.get(job["url"], headers=auth(key))
    assert r.status_code == 200, r.text
    return r.json()


def test_async_ingest_is_accepted_then_applied(client, memory):
    r = client.post("/v1/users/alice/conversations?async=true", headers=auth(KEY_A),
                    json=conversation("c1", "I always go for Italian food."))
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["status"] == "pending" and job["user"] == "alice"
    assert r.headers["location"] == job["url"] == f"/v1/users/alice/jobs/{job['id']}"
    done = wait_job(client, memory, job)
    assert done["status"] == "done" and done["result"]["decisions"][0]["action"] == "insert"
    assert "Italian" not in str(done["result"])            # the job keeps no words of the user
    prefs = client.get("/v1/users/alice/preferences", headers=auth(KEY_A)).json()["preferences"]
    assert [p["sentence"] for p in prefs] == ["I always go for Italian food."]


def test_a_job_is_not_visible_to_another_user_or_tenant(client):
    r = client.post("/v1/users/alice/conversations?async=true", headers=auth(KEY_A),
                    json=conversation("c1", "I always go for Italian food."))
    job_id = r.json()["id"]
    assert client.get(f"/v1/users/bob/jobs/{job_id}", headers=auth(KEY_A)).status_code == 404
    assert client.get(f"/v1/users/alice/jobs/{job_id}", headers=auth(KEY_B)).status_code == 404
    token = client.post("/v1/users/bob/tokens", headers=auth(KEY_A)).json()["token"]
    assert client.get(f"/v1/users/alice/jobs/{job_id}", headers=auth(token)).status_code == 403
    r = client.get("/v1/users/alice/jobs/nope", headers=auth(KEY_A))
    assert r.status_code == 404 and r.json()["code"] == "not_found"


def test_async_ingest_checks_limits_before_queueing(client):
    r = client.post("/v1/users/alice/conversations?async=true", headers=auth(KEY_A),
                    json=conversation("c1", "x" * 5000))
    assert r.status_code == 413


def test_async_jobs_of_one_user_keep_their_order(client, memory):
    accepted = []
    for i, t in enumerate(["19", "20", "21", "22"]):
        r = client.post("/v1/users/alice/conversations?async=true", headers=auth(KEY_A),
                        json=conversation(f"c{i}", f"Set the temperature to {t} degrees, I always like it so."))
        accepted.append(r.json())
    jobs = [wait_job(client, memory, j) for j in accepted]
    assert all(j["status"] == "done" for j in jobs)
    # one user's jobs run one after another in the order they were accepted: each starts after the previous finished
    for earlier, later in zip(jobs, jobs[1:]):
        assert earlier["finished_at"] <= later["started_at"], (earlier, later)


def test_jobs_left_by_a_previous_process_run_when_the_server_starts(memory):
    from fastapi.testclient import TestClient

    from boundmem.models import Conversation, Turn
    from boundmem.service.app import create_app
    from boundmem.user_id import namespaced

    from .conftest import KEYS

    job = memory.jobs.submit(namespaced("acme", "alice"),
                             Conversation(id="c1", turns=(Turn(role="user", text="I always go for Italian food."),)))
    with TestClient(create_app(memory, KEYS)) as c:    # nobody submits: the worker started with the app runs it
        assert wait_job(c, memory, {"id": job.id, "url": f"/v1/users/alice/jobs/{job.id}"})["status"] == "done"


def test_a_job_says_what_it_observed_without_the_users_words(client, memory):
    r = client.post("/v1/users/alice/conversations?async=true", headers=auth(KEY_A),
                    json=conversation("c1", "Play some Jazz."))
    done = wait_job(client, memory, r.json())
    assert done["status"] == "done", done
    (o,) = done["result"]["observed"]
    assert o["path"] == "entertainment_and_media/music/favorite_genres" and done["result"]["promoted"] == []
    held = client.get("/v1/users/alice/observations", headers=auth(KEY_A)).json()["observations"]
    assert [x["id"] for x in held] == [o["id"]]
    assert "Jazz" not in str(done["result"])
