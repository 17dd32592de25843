"""The ``s3`` backup: any S3-compatible object store through boto3.

Layout: bucket ``S3_BUCKET`` (default ``smriti-backups``, created when missing), one key
prefix per user: ``{user}/memory.jsonl`` (the snapshot, its sha256 in the object's
metadata) then ``{user}/manifest.json`` (sha256, counts, time and the snapshot's VersionId
or ETag), written last. A PUT is atomic, so an interrupted sync leaves either the previous
pair or a complete newer ``memory.jsonl``; restore reads the version the manifest names
(when bucket versioning is on) and checks the sha256 either way.

``S3_ENDPOINT`` selects a non-AWS provider (MinIO, R2, B2, ...; path-style addressing is
used then). botocore's own retries are off: the backup's retry policy decides.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smriti.stores.backup.remote import MANIFEST_NAME, SNAPSHOT_NAME, BackupError, RemoteError

if TYPE_CHECKING:
    from smriti.config import Settings

logger = logging.getLogger("smriti.backup")
_MISSING = {"404", "NoSuchKey", "NoSuchBucket", "NotFound"}
# HEAD answers carry no body, so a refused key shows up as a bare "403".
_AUTH_CODES = {"403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden"}
_AUTH_HINT = " (access denied: check S3_ACCESS_KEY, S3_SECRET_KEY and the bucket's policy)"


class S3Remote:
    """Put and get the backup files of one user under ``s3://{bucket}/{user}/``.

    Args:
        client: a boto3 S3 client.
        bucket: bucket name.
        user: the key prefix.
        region: used when the bucket has to be created.
    """

    def __init__(self, client: Any, bucket: str, user: str, region: str = "") -> None:
        self.client, self.bucket, self.region = client, bucket, region
        self.prefix = f"{user}/"
        self.location = f"s3://{bucket}/{self.prefix}"
        self._bucket_ready = False
        self.deadline: float | None = None

    @classmethod
    def from_settings(cls, settings: Settings, user: str, timeout: float = 30.0) -> S3Remote:
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            raise BackupError("BACKUP_TYPE=s3 needs boto3: pip install 'smriti-graph[s3]'") from None
        options: dict[str, Any] = {
            "connect_timeout": min(timeout, 10.0),
            "read_timeout": timeout,
            "retries": {"mode": "standard", "total_max_attempts": 1},
        }
        if settings.s3_endpoint:
            options["s3"] = {"addressing_style": "path"}
        secret = settings.s3_secret_key
        access = settings.s3_access_key
        client = boto3.client(
            "s3",
            endpoint_url=settings.s3_endpoint or None,
            region_name=settings.s3_region or None,
            aws_access_key_id=access.get_secret_value() if access else None,
            aws_secret_access_key=secret.get_secret_value() if secret else None,
            config=Config(**options),
        )
        return cls(client, settings.s3_bucket, user, settings.s3_region)

    # ------------------------------------------------------------------ plumbing
    def _call(self, operation: str, **params: Any) -> Any:
        """One S3 call; every failure becomes a one-line RemoteError (retryable)."""
        from botocore.exceptions import BotoCoreError, ClientError

        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise RemoteError(f"S3 {operation} on {self.location}: the sync ran out of time")
        try:
            return getattr(self.client, operation)(Bucket=self.bucket, **params)
        except ClientError as error:
            info = error.response.get("Error", {})
            code = str(info.get("Code", "error"))
            message = info.get("Message") or error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            hint = _AUTH_HINT if code in _AUTH_CODES else ""
            raised = RemoteError(f"S3 {operation} on {self.location} failed: {code}: {message}{hint}")
            raised.code = code  # type: ignore[attr-defined]
            raise raised from None
        except BotoCoreError as error:
            raise RemoteError(f"S3 {operation} on {self.location} failed: {error}") from None

    def _ensure_bucket(self) -> None:
        if self._bucket_ready:
            return
        try:
            self._call("head_bucket")
        except RemoteError as error:
            if getattr(error, "code", "") not in _MISSING:
                raise
            params: dict[str, Any] = {}
            if self.region and self.region != "us-east-1":
                params["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
            logger.info("creating bucket %s", self.bucket)
            self._call("create_bucket", **params)
        self._bucket_ready = True

    # ------------------------------------------------------------------ Remote
    def push(self, snapshot: Path, manifest: dict[str, Any]) -> dict[str, Any]:
        """Upload the snapshot, then the manifest naming it.

        A bucket deleted while the server runs is created again: "the bucket exists" is only
        remembered until S3 says otherwise.
        """
        self._ensure_bucket()
        try:
            return self._put(snapshot, manifest)
        except RemoteError as error:
            if getattr(error, "code", "") != "NoSuchBucket":
                raise
            logger.warning("%s: the bucket is gone; creating it again", self.location)
            self._bucket_ready = False
            self._ensure_bucket()
            return self._put(snapshot, manifest)

    def _put(self, snapshot: Path, manifest: dict[str, Any]) -> dict[str, Any]:
        with snapshot.open("rb") as body:
            put = self._call(
                "put_object",
                Key=self.prefix + SNAPSHOT_NAME,
                Body=body,
                ContentType="application/x-ndjson",
                Metadata={"sha256": manifest["sha256"]},
            )
        version, etag = put.get("VersionId") or "", str(put.get("ETag", "")).strip('"')
        manifest = {
            **manifest,
            "snapshot": {"key": self.prefix + SNAPSHOT_NAME, "version_id": version, "etag": etag},
        }
        self._call(
            "put_object",
            Key=self.prefix + MANIFEST_NAME,
            Body=json.dumps(manifest, indent=2).encode(),
            ContentType="application/json",
        )
        return {"revision": version or etag, "version_id": version, "etag": etag}

    def manifest(self) -> dict[str, Any] | None:
        try:
            body = self._call("get_object", Key=self.prefix + MANIFEST_NAME)["Body"].read()
        except RemoteError as error:
            if getattr(error, "code", "") in _MISSING:
                return None
            raise
        try:
            manifest = json.loads(body)
        except ValueError:
            raise BackupError(f"{self.location}{MANIFEST_NAME} is not JSON") from None
        snapshot = manifest.get("snapshot", {})
        manifest["revision"] = snapshot.get("version_id") or snapshot.get("etag", "")
        return manifest

    def fetch(self, target: Path) -> dict[str, Any] | None:
        """Download the snapshot the manifest names into ``target``.

        Without bucket versioning a sync interrupted between the two PUTs leaves a newer,
        complete ``memory.jsonl`` than the manifest describes: it is accepted when it
        matches the sha256 stored with it, which makes it the newest good snapshot.
        """
        manifest = self.manifest()
        if manifest is None:
            return None
        version = manifest.get("snapshot", {}).get("version_id")
        params = {"VersionId": version} if version else {}
        got = self._call("get_object", Key=self.prefix + SNAPSHOT_NAME, **params)
        digest = hashlib.sha256()
        with target.open("wb") as stream:
            for chunk in got["Body"].iter_chunks(1 << 20):
                stream.write(chunk)
                digest.update(chunk)
        sha = digest.hexdigest()
        own = (got.get("Metadata") or {}).get("sha256")
        if sha != manifest.get("sha256") and sha == own:
            logger.warning(
                "%s: the last sync was interrupted before its manifest; using its snapshot", self.location
            )
            etag = str(got.get("ETag", "")).strip('"')
            manifest = {**manifest, "sha256": sha, "counts": {}, "time": None, "revision": etag}
        return manifest
