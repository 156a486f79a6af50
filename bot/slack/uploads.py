"""Slack files → knowledge base: check Slack's metadata, download with the bot token, ingest, report.

Files come from the upload modal's `file_input`, or are dropped into a DM with the bot. Oversize and
unsupported files are refused from Slack's metadata before anything is downloaded. `url_private` is
fetched with the bot token, and the token is only ever sent to Slack (or to the configured
`SLACK_API_URL` host) — never along a redirect to somewhere else.
"""

from __future__ import annotations

import logging
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import quote, urlparse, urlsplit, urlunsplit

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.core import SUPPORTED_SUFFIXES, USER_ERRORS, AccessDenied, NotFound, Origin, Upload
from bot.slack.deps import SlackDeps
from bot.slack.render import NAME_CHARS, clamp, escape, shorten

log = logging.getLogger(__name__)

DOWNLOAD_TIMEOUT_S = 60


@dataclass
class SlackFile:
    id: str
    name: str
    size: int | None = None
    url: str | None = None
    permalink: str | None = None
    mimetype: str | None = None

    @classmethod
    def from_payload(cls, data: dict) -> SlackFile:
        name = data.get("name") or data.get("title") or data.get("id") or "file"
        size = data.get("size")
        return cls(
            id=str(data.get("id") or ""),
            name=PurePosixPath(str(name)).name or "file",
            size=int(size) if isinstance(size, (int, float)) or (isinstance(size, str) and size.isdigit()) else None,
            url=data.get("url_private_download") or data.get("url_private"),
            permalink=data.get("permalink"),
            mimetype=data.get("mimetype"),
        )


@dataclass
class FileResult:
    name: str
    status: str  # "ready" | "unchanged" | "failed" | "refused"
    chunks: int = 0
    detail: str | None = None

    @property
    def ok(self) -> bool:
        return self.status in ("ready", "unchanged")


def _mb(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB"


def precheck(file: SlackFile, max_bytes: int) -> str | None:
    """Why this file is refused before download (from Slack's metadata), or None."""
    suffix = PurePosixPath(file.name).suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        return f"unsupported file type {suffix or '(none)'}; supported: {', '.join(SUPPORTED_SUFFIXES)}"
    if file.size is not None and file.size > max_bytes:
        return f"{_mb(file.size)} is over the {_mb(max_bytes)} upload limit"
    return None


class _NoTokenLeakRedirects(urllib.request.HTTPRedirectHandler):
    def __init__(self, trusted_hosts: set[str]):
        self.trusted_hosts = trusted_hosts

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001 - urllib's signature
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and not is_trusted_host(newurl, self.trusted_hosts):
            new.remove_header("Authorization")
        return new


def is_trusted_host(url: str, trusted_hosts: set[str]) -> bool:
    host = (urlparse(url).hostname or "").lower()
    return host in trusted_hosts or host == "slack.com" or host.endswith(".slack.com")


class DownloadError(Exception):
    pass


def download(url: str, token: str, max_bytes: int, trusted_hosts: set[str], expect_html: bool = False) -> bytes:
    if not is_trusted_host(url, trusted_hosts):
        raise DownloadError("the file's URL is not a Slack URL; refusing to send the bot token there")
    opener = urllib.request.build_opener(_NoTokenLeakRedirects(trusted_hosts))
    parts = urlsplit(url)  # a file name with non-ASCII characters is part of the path
    url = urlunsplit(parts._replace(path=quote(parts.path, safe="/%"), query=quote(parts.query, safe="=&%")))
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with opener.open(request, timeout=DOWNLOAD_TIMEOUT_S) as response:
            content_type = (response.headers.get("Content-Type") or "").lower()
            if "text/html" in content_type and not expect_html:
                # Slack answers a token without files:read with its sign-in page, not an error status.
                raise DownloadError("Slack returned a web page instead of the file (does the app have files:read?)")
            chunks, total = [], 0
            while True:
                chunk = response.read(64 * 1024)
                if not chunk:
                    break
                total += len(chunk)
                if total > max_bytes:
                    raise DownloadError(f"the file is over the {_mb(max_bytes)} upload limit")
                chunks.append(chunk)
            return b"".join(chunks)
    except urllib.error.HTTPError as exc:
        raise DownloadError(f"download failed: HTTP {exc.code}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:  # the reason goes to the log, not to Slack
        log.warning("downloading a Slack file failed: %s", getattr(exc, "reason", exc))
        raise DownloadError("download failed (network error); please try again") from None


def resolve(client: WebClient, file: SlackFile) -> SlackFile:
    """Fill in what the event payload left out (Slack sometimes sends only an id)."""
    try:
        info = client.files_info(file=file.id)["file"]
    except SlackApiError as exc:
        raise DownloadError(f"could not read the file's details from Slack ({exc.response.get('error')})") from None
    return SlackFile.from_payload(info)


def ingest_slack_files(
    deps: SlackDeps, client: WebClient, origin: Origin, kb: str, files: list[SlackFile]
) -> list[FileResult]:
    """Download the files, then ingest them into `kb` as one batch; a bad file never stops the others. The
    application layer decides whether this person may upload there — before anything is downloaded."""
    try:
        deps.bot.check_upload(origin, kb)
    except (NotFound, AccessDenied) as exc:
        return [FileResult(f.name, "refused", detail=str(exc)) for f in files]
    max_bytes = deps.settings.max_upload_bytes
    results: list[FileResult] = []
    uploads: list[Upload] = []
    for file in files:
        try:
            if not file.url:  # metadata only (files.info); nothing is downloaded before the checks
                file = resolve(client, file)
            reason = precheck(file, max_bytes)
            if reason:
                results.append(FileResult(file.name, "refused", detail=reason))
                continue
            if not file.url:
                raise DownloadError("Slack did not give a download URL for this file")
            expect_html = PurePosixPath(file.name).suffix.lower() in (".html", ".htm")
            uploads.append(
                Upload(
                    file.name,
                    download(file.url, deps.bot_token, max_bytes, deps.trusted_hosts, expect_html),
                    file.permalink,
                )
            )
        except DownloadError as exc:
            results.append(FileResult(file.name, "failed", detail=str(exc)))
    if not uploads:
        return results
    try:
        report = deps.bot.upload(origin, kb, uploads)
    except USER_ERRORS as exc:
        return results + [FileResult(u.name, "failed", detail=str(exc)) for u in uploads]
    except Exception:
        log.exception("ingesting %s into %s failed", [u.name for u in uploads], kb)
        return results + [
            FileResult(u.name, "failed", detail="internal error while ingesting (see the bot's log)") for u in uploads
        ]
    return results + [FileResult(doc.document, doc.status, doc.chunks, doc.error) for doc in report.documents]


def results_text(kb: str, results: list[FileResult]) -> str:
    ok = sum(r.ok for r in results)
    lines = [f"*Upload to `{escape(kb)}`*: {ok} of {len(results)} file{'s' if len(results) != 1 else ''} ingested"]
    for r in results:
        name = escape(shorten(r.name, NAME_CHARS)).replace("`", "'")
        detail = escape(shorten(r.detail or "unknown error", 200))
        if r.status == "ready":
            lines.append(f":white_check_mark: `{name}` — ready, {r.chunks} chunk{'s' if r.chunks != 1 else ''}")
        elif r.status == "unchanged":
            lines.append(f":heavy_equals_sign: `{name}` — unchanged (same content already live)")
        elif r.status == "refused":
            lines.append(f":no_entry: `{name}` — refused: {detail}")
        else:
            lines.append(f":x: `{name}` — failed: {detail}")
    return clamp("\n".join(lines))
