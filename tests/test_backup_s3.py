"""BACKUP_TYPE=s3 against moto's S3 server over real HTTP (S3_ENDPOINT=http://127.0.0.1:<port>)."""

from __future__ import annotations

import hashlib
import json
import socket
import uuid

import boto3
import pytest
import requests

from smriti.runtime import close_runtime, open_runtime
from smriti.stores.backup import BackupError
from tests.backup_helpers import (
    FAST_RETRY,
    assert_same_memory,
    export_dies_half_way,
    fill,
    leftovers,
    picture,
    with_settings,
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def endpoint():
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3_settings(settings, endpoint):
    """A fresh bucket name per test, so tests never see each other's objects."""
    return with_settings(
        settings,
        backup_type="s3",
        s3_endpoint=endpoint,
        s3_region="us-east-1",
        s3_access_key="testing",
        s3_secret_key="testing",
        s3_bucket=f"smriti-{uuid.uuid4().hex[:12]}",
    )


@pytest.fixture
def s3(endpoint):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


@pytest.fixture
def runtimes():
    opened = []

    def open_(settings):
        runtime = open_runtime(settings)
        runtime.backup.retry = FAST_RETRY
        opened.append(runtime)
        return runtime

    yield open_
    for runtime in opened:
        close_runtime(runtime, final_sync=False)


def read(s3, bucket: str, key: str, **params) -> bytes:
    return s3.get_object(Bucket=bucket, Key=key, **params)["Body"].read()


def test_sync_creates_the_bucket_pushes_changes_only_and_restores(s3_settings, s3, tmp_path, runtimes):
    bucket = s3_settings.s3_bucket
    runtime = runtimes(s3_settings)
    fill(runtime.memory)

    first = runtime.sync()
    assert first["pushed"] is True and first["location"] == f"s3://{bucket}/alice/"
    manifest = json.loads(read(s3, bucket, "alice/manifest.json"))
    snapshot = read(s3, bucket, "alice/memory.jsonl")
    assert hashlib.sha256(snapshot).hexdigest() == manifest["sha256"] == first["sha256"]
    assert manifest["counts"]["engrams"] == 6
    etag = s3.head_object(Bucket=bucket, Key="alice/memory.jsonl")["ETag"].strip('"')
    assert first["revision"] == etag  # no versioning on a bucket Smriti created: the ETag

    assert runtime.sync()["reason"] == "unchanged"
    assert s3.head_object(Bucket=bucket, Key="alice/memory.jsonl")["ETag"].strip('"') == etag

    runtime.memory.store("Carol set up Kubernetes autoscaling for the Atlas workers.")
    second = runtime.sync()
    assert second["pushed"] is True and second["revision"] != first["revision"]
    assert json.loads(read(s3, bucket, "alice/manifest.json"))["counts"]["engrams"] == 7
    before = picture(runtime.memory.context.store)

    elsewhere = runtimes(with_settings(s3_settings, storage_location=tmp_path / "new-machine"))
    restored = elsewhere.restore()
    assert (
        restored["restored"] is True and restored["verified"] is True and restored["counts"]["engrams"] == 7
    )
    assert_same_memory(before, picture(elsewhere.memory.context.store))
    assert elsewhere.sync()["reason"] == "unchanged"
    assert leftovers(tmp_path / "new-machine" / "alice") == []


def test_versioned_bucket_records_version_ids_and_restores_the_named_snapshot(
    s3_settings, s3, tmp_path, runtimes
):
    bucket = s3_settings.s3_bucket
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    runtime = runtimes(s3_settings)
    fill(runtime.memory)
    pushed = runtime.sync()
    assert pushed["revision"] == s3.head_object(Bucket=bucket, Key="alice/memory.jsonl")["VersionId"]
    good = picture(runtime.memory.context.store)

    # A sync interrupted after its snapshot upload: a broken memory.jsonl, manifest not updated.
    s3.put_object(Bucket=bucket, Key="alice/memory.jsonl", Body=b'{"kind": "engram", "trunc')
    restored = runtimes(with_settings(s3_settings, storage_location=tmp_path / "other")).restore()
    assert restored["revision"] == pushed["revision"] and restored["verified"] is True
    assert restored["counts"]["engrams"] == len(good["engrams"]) == 6


def test_unversioned_interrupted_sync_restores_a_complete_snapshot_or_refuses(
    s3_settings, s3, tmp_path, runtimes
):
    bucket = s3_settings.s3_bucket
    runtime = runtimes(s3_settings)
    fill(runtime.memory)
    runtime.sync()
    snapshot = read(s3, bucket, "alice/memory.jsonl")

    # A garbled object (not the one the manifest names, no matching sha256): refused clearly.
    s3.put_object(Bucket=bucket, Key="alice/memory.jsonl", Body=snapshot[:200])
    target = runtimes(with_settings(s3_settings, storage_location=tmp_path / "target"))
    with pytest.raises(BackupError, match="damaged"):
        target.restore()
    assert target.memory.context.store.count_engrams() == 0

    # A complete newer snapshot whose manifest never got written: it is the newest good one.
    newer = snapshot.splitlines(keepends=True)
    body = b"".join(line for line in newer if b"Kubernetes" not in line)
    sha = hashlib.sha256(body).hexdigest()
    s3.put_object(Bucket=bucket, Key="alice/memory.jsonl", Body=body, Metadata={"sha256": sha})
    assert target.restore()["counts"]["engrams"] == 6


def test_export_dying_half_way_leaves_the_last_good_backup(s3_settings, s3, runtimes, monkeypatch):
    bucket = s3_settings.s3_bucket
    runtime = runtimes(s3_settings)
    store = runtime.memory.context.store
    runtime.memory.store("Alice prefers PostgreSQL for Atlas.")
    good = runtime.sync()
    runtime.memory.store("Bob prefers cursor pagination for the orders API.")
    real_export = store.export_records
    export_dies_half_way(store, monkeypatch, after=4)
    with pytest.raises(BackupError, match="disk full"):
        runtime.sync()
    assert s3.head_object(Bucket=bucket, Key="alice/memory.jsonl")["ETag"].strip('"') == good["revision"]
    assert json.loads(read(s3, bucket, "alice/manifest.json"))["sha256"] == good["sha256"]
    assert store.count_engrams() == 2 and runtime.backup_status()["last_error"] == "disk full"
    monkeypatch.setattr(store, "export_records", real_export)
    assert runtime.sync()["counts"]["engrams"] == 2


def test_wrong_credentials_give_a_clear_error_and_the_store_keeps_working(s3_settings, endpoint, runtimes):
    wrong = with_settings(s3_settings, s3_access_key="AKIAWRONGWRONGWRONG1", s3_secret_key="nope")
    runtime = runtimes(wrong)
    runtime.memory.store("Alice prefers PostgreSQL for Atlas.")
    # moto accepts any key until IAM checks are switched on (0 requests without auth).
    requests.post(f"{endpoint}/moto-api/reset-auth", data=b"0", timeout=5).raise_for_status()
    try:
        with pytest.raises(BackupError) as failed:
            runtime.sync()
    finally:
        requests.post(f"{endpoint}/moto-api/reset-auth", data=b"inf", timeout=5).raise_for_status()
    message = str(failed.value)
    assert "403" in message and "check S3_ACCESS_KEY, S3_SECRET_KEY" in message and "\n" not in message
    assert "after 3 attempt(s)" in message
    assert "nope" not in message  # the secret never appears
    runtime.memory.store("Bob prefers cursor pagination for the orders API.")
    assert runtime.memory.context.store.count_engrams() == 2
    assert "access denied" in runtime.backup_status()["last_error"]


def test_unreachable_endpoint_is_retried_and_reported(s3_settings, runtimes):
    dead = with_settings(s3_settings, s3_endpoint=f"http://127.0.0.1:{free_port()}")
    runtime = runtimes(dead)
    runtime.memory.store("Alice prefers PostgreSQL for Atlas.")
    with pytest.raises(BackupError, match=r"after 3 attempt\(s\).*(connect|Connection)"):
        runtime.sync()
    status = runtime.backup_status()
    assert status["last_success"] is None and status["last_error"]


def test_a_bucket_deleted_while_running_is_created_again_and_refilled(s3_settings, s3, runtimes):
    bucket = s3_settings.s3_bucket
    runtime = runtimes(s3_settings)
    fill(runtime.memory)
    assert runtime.sync()["pushed"] is True

    # Someone empties and deletes the bucket while the server runs.
    for key in ("alice/memory.jsonl", "alice/manifest.json"):
        s3.delete_object(Bucket=bucket, Key=key)
    s3.delete_bucket(Bucket=bucket)

    # The memory did not change, yet the backup is gone: the sync must notice and push again.
    again = runtime.sync()
    assert again["pushed"] is True, again
    assert json.loads(read(s3, bucket, "alice/manifest.json"))["counts"]["engrams"] == 6

    # And a change after another deletion is pushed too (the "bucket exists" memo is dropped).
    s3.delete_object(Bucket=bucket, Key="alice/memory.jsonl")
    s3.delete_object(Bucket=bucket, Key="alice/manifest.json")
    s3.delete_bucket(Bucket=bucket)
    runtime.memory.store("Dana moved the nightly Atlas reports to Thursday mornings.")
    third = runtime.sync()
    assert third["pushed"] is True, third
    assert json.loads(read(s3, bucket, "alice/manifest.json"))["counts"]["engrams"] == 7
