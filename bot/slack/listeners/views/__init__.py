from slack_bolt import App

from .upload_modal import UPLOAD_CALLBACK_ID, handle_upload_submission


def register(app: App) -> None:
    app.view(UPLOAD_CALLBACK_ID)(handle_upload_submission)
