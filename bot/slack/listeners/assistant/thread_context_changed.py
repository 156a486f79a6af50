from bot.slack.deps import SlackDeps


def handle_thread_context_changed(deps: SlackDeps, event: dict):
    """The user looks at another channel: its KBs are searched first from now on (if the user may read them)."""
    thread = event.get("assistant_thread") or {}
    if thread.get("channel_id") and thread.get("thread_ts"):
        deps.pane_threads.save(
            channel_id=thread["channel_id"], thread_ts=thread["thread_ts"], context=thread.get("context") or {}
        )
