"""`warm_up_ingest` loads the chunker (llama-index's splitter and NLTK), so `kbbot eval scale` can time a
process's first-publish import apart from publishing."""

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
