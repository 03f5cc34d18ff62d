"""The kit's JupyterLab settings (jupyterlab/overrides.json, installed by `make install` into the environment's
lab settings): JupyterLab never asks a learner "Would you like to get notified about official Jupyter news?"."""
import json
import shutil
import sys
from pathlib import Path

from jupyterlab_server.settings_utils import get_settings

ROOT = Path(__file__).resolve().parents[1]
LAB = Path(sys.prefix) / "share" / "jupyter" / "lab"
NOTIFICATION = "@jupyterlab/apputils-extension:notification"


def effective(app_settings_dir, user_settings_dir):
    """The notification settings JupyterLab gives a learner whose own settings folder is ``user_settings_dir``:
    the schema's defaults, as the overrides in ``app_settings_dir`` set them, under the learner's own values."""
    settings, _ = get_settings(str(app_settings_dir), str(LAB / "schemas"), str(user_settings_dir),
                               schema_name=NOTIFICATION)
    defaults = {name: field["default"] for name, field in settings["schema"]["properties"].items()}
    return {**defaults, **settings["settings"]}


def test_a_new_learners_jupyterlab_fetches_no_news_and_never_asks(tmp_path):
    installed = LAB / "settings" / "overrides.json"
    assert json.loads(installed.read_text()) == json.loads((ROOT / "jupyterlab" / "overrides.json").read_text()), \
        "make install copies jupyterlab/overrides.json into the environment"
    assert effective(installed.parent, tmp_path / "user") == {"fetchNews": "false", "checkForUpdates": False,
                                                              "doNotDisturbMode": False}
    (tmp_path / "bare").mkdir()
    assert effective(tmp_path / "bare", tmp_path / "user")["fetchNews"] == "none", \
        "without the kit's settings JupyterLab asks (its default)"


def test_a_learner_can_still_turn_news_on_in_their_own_settings(tmp_path):
    own = tmp_path / "user" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    own.parent.mkdir(parents=True)
    own.write_text('{"fetchNews": "true"}')
    shutil.copy(LAB / "settings" / "overrides.json", tmp_path / "overrides.json")
    assert effective(tmp_path, tmp_path / "user")["fetchNews"] == "true"
