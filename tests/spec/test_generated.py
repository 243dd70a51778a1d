"""The committed protocol tables are exactly what tools/gen_spec.py makes from ../shared/spec."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC_DIR = ROOT.parent / "shared" / "spec"


@pytest.mark.skipif(not SPEC_DIR.is_dir(), reason="../shared/spec is not beside the checkout")
def test_generated_modules_match_a_fresh_generation():
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_spec.py"), "--check",
                             "--spec-dir", str(SPEC_DIR)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("module", ["amqp0_9_1", "amqp0_8", "amqp0_8_qpid", "amqp0_9", "amqp0_9_qpid",
                                    "amqp0_91_qpid"])
def test_generated_module_holds_no_prose(module):
    text = (ROOT / "warren" / "spec" / f"{module}.py").read_text()
    assert "do not edit" in text
    assert "MUST" not in text and "<doc" not in text
