import logging

from slack_bolt import Say, SetSuggestedPrompts

from bot.core import Origin
from bot.slack import pane
from bot.slack.conversation import GREETING_EVENT, slack_error
from bot.slack.deps import SlackDeps
from bot.slack.work import fire_and_forget

log = logging.getLogger(__name__)

UNAVAILABLE = "Hi! I can't reach the knowledge bases right now — ask your question and I'll try again."


def handle_thread_started(deps: SlackDeps, event: dict, say: Say, set_suggested_prompts: SetSuggestedPrompts):
    """A pane thread opens: remember it (before any message in it can arrive), then greet and suggest prompts
    on the side pool (the KBs and memberships are looked up there)."""
    thread = event.get("assistant_thread") or {}
    channel, thread_ts = thread.get("channel_id"), thread.get("thread_ts")
    if not channel or not thread_ts:
        return
    context = thread.get("context") or {}
    deps.pane_threads.save(channel_id=channel, thread_ts=thread_ts, context=context)
    origin = Origin.slack_assistant(channel, thread.get("user_id"), thread_ts, context.get("channel_id") or None)
    fire_and_forget(deps.side, greet, deps, origin, say, set_suggested_prompts)


def greet(deps: SlackDeps, origin: Origin, say: Say, set_suggested_prompts: SetSuggestedPrompts) -> None:
    metadata = {"event_type": GREETING_EVENT, "event_payload": {"context_channel": origin.context_channel or ""}}
    try:
        views = deps.bot.visible_kbs(origin)
        first = deps.bot.searched_first(origin)
    except Exception:  # the store failed: the log says why, the person gets no exception text
        log.exception("could not list the knowledge bases for the assistant pane")
        _say(say, UNAVAILABLE, metadata)
        return
    kbs = [pane.PaneKb(v.name, tuple(d.name for d in v.documents if d.state == "ready")) for v in views]
    names = [kb.name for kb in pane.ordered(kbs, first)]
    _say(say, pane.greeting(names, first, origin.context_channel), metadata)
    prompts = pane.suggested_prompts(kbs, first)
    if not prompts:
        return
    try:
        set_suggested_prompts(prompts=prompts, title=pane.PROMPTS_TITLE)
    except Exception as exc:  # the greeting is out; prompts are a nicety
        log.warning("assistant.threads.setSuggestedPrompts failed: %s", slack_error(exc))


def _say(say: Say, text: str, metadata: dict) -> None:
    try:
        say(text=text, metadata=metadata, unfurl_links=False, unfurl_media=False)
    except Exception as exc:
        log.warning("could not greet in the assistant pane: %s", slack_error(exc))
