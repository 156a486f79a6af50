"""The Bolt app, built from Settings.

- `SLACK_API_URL` overrides the Web API base URL (tests point it at a fake Slack on 127.0.0.1).
- Slack's 429s are honoured: the WebClient retries rate-limited calls after `Retry-After`, and
  retries connection resets and 5xx once.
- `token_verification_enabled`: Bolt calls `auth.test` while constructing the App. `kbbot serve`
  keeps it on (a bad token fails at start-up with a clear message); pass False where the API
  may not be reachable yet — the first request then authorizes lazily.
- HTTP mode verifies every request's signature and timestamp (`SLACK_SIGNING_SECRET`, 5-minute
  window → 401); Socket Mode needs no signing secret.
"""

from __future__ import annotations

import logging
import re

from pydantic import SecretStr
from slack_bolt import App
from slack_bolt.error import BoltError
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)

from bot.config import Settings
from bot.core import KnowledgeBot
from bot.slack.deps import SlackDeps, build_deps
from bot.slack.idempotency import deduplicate_deliveries
from bot.slack.listeners import register_listeners
from bot.slack.membership import SlackMembership
from bot.slack.people import SlackPeople

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://slack.com/api/"


class SlackConfigError(Exception):
    """Slack settings that cannot work; the message says which and how to fix it."""


def api_base_url(settings: Settings) -> str:
    url = (settings.slack_api_url or DEFAULT_API_URL).strip()
    return url if url.endswith("/") else url + "/"


def build_web_client(settings: Settings, token: str | None = None) -> WebClient:
    return WebClient(
        token=token,
        base_url=api_base_url(settings),
        timeout=30,
        retry_handlers=[
            ConnectionErrorRetryHandler(max_retry_count=2),
            RateLimitErrorRetryHandler(max_retry_count=3),
            ServerErrorRetryHandler(max_retry_count=1),
        ],
    )


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value().strip() or None if value is not None else None


def build_slack(
    settings: Settings,
    bot: KnowledgeBot | None = None,
    *,
    socket_mode: bool = False,
    token_verification_enabled: bool = True,
) -> tuple[App, SlackDeps]:
    """The Bolt app and what its listeners share. `bot` defaults to one over the configured data dir;
    either way it looks up channel membership through this app's Web API client."""
    token = _secret(settings.slack_bot_token)
    if not token:
        raise SlackConfigError("SLACK_BOT_TOKEN is not set (the bot token, xoxb-…, from OAuth & Permissions)")
    signing_secret = _secret(settings.slack_signing_secret)
    if not socket_mode and not signing_secret:
        raise SlackConfigError(
            "SLACK_BOT_TOKEN is set, but neither SLACK_APP_TOKEN (Socket Mode, the easy way: Basic Information → "
            "App-Level Tokens, scope connections:write) nor SLACK_SIGNING_SECRET (HTTP mode: Basic Information → "
            "Signing Secret) is; set one of them (see 'Slack app setup' in README.md)"
        )
    client = build_web_client(settings, token)
    if bot is None:
        bot = KnowledgeBot(settings)
    bot.membership = SlackMembership(client)
    deps = build_deps(settings, bot)
    deps.people = SlackPeople(client)
    try:
        app = App(
            client=client,  # carries the token; passing both only logs a warning
            signing_secret=signing_secret or "",
            token_verification_enabled=token_verification_enabled,
            request_verification_enabled=bool(signing_secret),
            # Long-running server: ack first, work afterwards (process_before_response is for FaaS).
            process_before_response=False,
            listener_executor=deps.listeners,
        )
    except SlackApiError as exc:
        raise SlackConfigError(
            f"Slack rejected the bot token ({exc.response.get('error')}); check SLACK_BOT_TOKEN"
        ) from None
    except BoltError as exc:  # Bolt's auth.test at construction failed
        code = re.search(r"'error': '([a-z_]+)'", str(exc))
        if code:
            raise SlackConfigError(
                f"Slack rejected the bot token ({code.group(1)}) at {api_base_url(settings)}auth.test; "
                "check SLACK_BOT_TOKEN"
            ) from None
        raise SlackConfigError(
            f"could not verify the bot token with {api_base_url(settings)}auth.test: {exc}"
        ) from None
    except OSError as exc:  # DNS, refused connection, timeout
        raise SlackConfigError(
            f"could not reach Slack at {api_base_url(settings)} ({exc}); check SLACK_API_URL and the network"
        ) from None

    app.use(deduplicate_deliveries(deps.ledger))
    register_listeners(app, deps)

    @app.error
    def on_error(error: Exception, body: dict, logger: logging.Logger) -> None:
        logger.error("unhandled error in a Slack listener: %s: %s", type(error).__name__, error)

    return app, deps
