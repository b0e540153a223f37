"""Batch matrices: what a matrix file expands to, and the one-line errors for broken ones."""

import subprocess
import sys
from pathlib import Path

import pytest

from spillage.runner.matrix import MatrixError
from spillage.runner.matrix import load_matrix

MATRICES = Path(__file__).parent.parent / "matrices"


def matrix(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_matrix_is_the_product_of_its_lists(tmp_path):
    m = load_matrix(matrix(tmp_path, """
scenarios: [shop-kettle-chat, bazaar-film-camera-chat]
frameworks: [browser-use, autogen]
models: [scripted:minimal, "openai-compatible:http://127.0.0.1:8000/v1#qwen2.5"]
conditions:
  - {name: original}
  - {name: sanitized-note, prompt: sanitized, system_note: Share only what the task needs.}
repeats: 2
timeout: 60
"""))
    assert len(m.runs) == 2 * 2 * 2 * 2 * 2
    assert len({r.key for r in m.runs}) == len(m.runs)
    assert m.name == "m" and m.timeout == 60 and m.max_steps == 50 and m.seed == 0
    first = m.runs[0]
    assert first.key == "shop-kettle-chat--browser-use--scripted-minimal--original--r1"
    assert any(r.key == "bazaar-film-camera-chat--autogen--openai-compatible-qwen2.5--sanitized-note--r2" for r in m.runs)
    noted = next(r for r in m.runs if r.condition.name == "sanitized-note")
    assert noted.condition.condition.prompt == "sanitized" and noted.condition.condition.system_note


def test_a_matrix_runs_its_agents_in_the_sandbox_unless_it_says_isolation_none(tmp_path):
    from spillage.runner.batch import run_arguments

    base = "scenarios: [shop-kettle-chat]\nframeworks: [browser-use]\nmodels: [scripted:minimal]\n"
    sandboxed = load_matrix(matrix(tmp_path, base))
    assert sandboxed.isolation == "sandbox" and "--isolation" not in run_arguments(sandboxed, sandboxed.runs[0], False)
    plain = load_matrix(matrix(tmp_path, base + "isolation: none\n"))
    arguments = run_arguments(plain, plain.runs[0], False)
    assert arguments[arguments.index("--isolation") + 1] == "none"


def test_all_means_the_benchmark_and_styles_filter_it(tmp_path):
    m = load_matrix(matrix(tmp_path, "scenarios: all\nstyles: [email]\nframeworks: [browser-use]\n"
                                     "models: [scripted:minimal]\n"))
    assert len(m.runs) == 60 and all(r.scenario.style == "email" for r in m.runs)


def test_the_shipped_matrices_load():
    smoke = load_matrix(MATRICES / "smoke.yaml")
    paper = load_matrix(MATRICES / "paper.yaml")
    assert len(smoke.runs) == 8 and {r.framework for r in smoke.runs} == {"browser-use", "autogen"}
    assert len({r.scenario.id for r in paper.runs}) == 180
    assert {r.framework for r in paper.runs} == {"browser-use", "autogen"}


@pytest.mark.parametrize("text, expected", [
    ("scenarios: [shop-kettle-chat]\nframeworks: [browser-use]\n", "models: expected a non-empty list"),
    ("scenarios: [shop-kettle-chat]\nframeworks: [selenium]\nmodels: [scripted:minimal]\n",
     ":2: frameworks[0]: 'selenium' is not one of browser-use, autogen"),
    ("scenarios: [shop-kettle-chat]\nframeworks: [browser-use]\nmodels: [scripted:shy]\n",
     ":3: models[0]: model 'scripted:shy': no scripted policy"),
    ("scenarios: [no-such-scenario]\nframeworks: [browser-use]\nmodels: [scripted:minimal]\n",
     ":1: scenarios[0]: no-such-scenario"),
    ("scenarios: [shop-kettle-chat]\nframeworks: [browser-use]\nmodels: [scripted:minimal]\nrepeat: 3\n",
     ":4: repeat: unknown key"),
    ("scenarios: [shop-kettle-chat]\nframeworks: [browser-use]\nmodels: [scripted:minimal]\nrepeats: 0\n",
     "repeats: expected a whole number of at least 1"),
    ("scenarios: [shop-kettle-chat]\nframeworks: [browser-use]\nmodels: [scripted:minimal]\n"
     "conditions: [{name: a b}]\n", "conditions[0]: name 'a b'"),
    ("scenarios: [shop-kettle-chat]\nframeworks: [browser-use]\nmodels: [scripted:minimal]\n"
     "conditions: [{name: x}, {name: x}]\n", "two runs would share the name"),
    ("scenarios: [shop-kettle-chat]\nframeworks: [browser-use]\nmodels: [scripted:minimal]\nisolation: nobody\n",
     ":4: isolation: expected one of sandbox, none, not 'nobody'"),
    ("scenarios: [shop-kettle-chat\n", "not valid YAML"),
    ("- just a list\n", "expected a mapping"),
])
def test_a_broken_matrix_is_one_line_naming_file_and_place(tmp_path, text, expected):
    path = matrix(tmp_path, text)
    with pytest.raises(MatrixError) as caught:
        load_matrix(path)
    message = str(caught.value)
    assert message.startswith(str(path)) and expected in message and "\n" not in message


def test_dry_run_lists_the_session_names_and_a_broken_matrix_exits_2(tmp_path):
    good = matrix(tmp_path, "scenarios: [shop-kettle-chat]\nframeworks: [browser-use]\n"
                            "models: [scripted:minimal, scripted:clicker]\n")
    listed = subprocess.run([sys.executable, "-m", "spillage.runner.cli", "batch", str(good), "--dry-run"],
                            capture_output=True, text=True, cwd=tmp_path)
    assert listed.returncode == 0
    assert listed.stdout.split() == ["shop-kettle-chat--browser-use--scripted-minimal--original--r1",
                                     "shop-kettle-chat--browser-use--scripted-clicker--original--r1"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("scenarios: [shop-kettle-chat]\n", encoding="utf-8")
    refused = subprocess.run([sys.executable, "-m", "spillage.runner.cli", "batch", str(bad)],
                             capture_output=True, text=True, cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and str(bad) in refused.stderr
