"""The chunker is loaded before the first upload (`kbbot serve`'s start-up thread calls this), so the first
document published after a restart does not pay for importing llama-index's splitter and NLTK."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
from bot.config import load_settings
from bot.core import KnowledgeBot
bot = KnowledgeBot(load_settings(data_dir=sys.argv[1], knowledge_bases_dir=sys.argv[1] + "/kbs", openai_api_key=None))
before = "nltk" in sys.modules
bot.warm_up_ingest()
print(before, "nltk" in sys.modules, "llama_index.core.node_parser" in sys.modules)
"""


def test_warm_up_ingest_loads_the_splitter_in_a_fresh_process(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-3:] == ["False", "True", "True"]
