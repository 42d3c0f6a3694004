"""The README's Python section, run as it is written: its install command is the wheel this
suite runs on (scripts/python-binding.sh builds and installs it the same way), and each of its
Python blocks is executed; the LangChain one with a fake chat model as its `model`."""

import re

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from conftest import ROOT


def python_blocks():
    text = (ROOT / "README.md").read_text()
    section = text.split("## From Python", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


class ToolFreeModel(GenericFakeChatModel):
    def bind_tools(self, tools, **kwargs):
        return self


def test_the_readmes_python_runs(isolated):
    blocks = python_blocks()
    assert len(blocks) == 2
    exec(compile(blocks[0], "README.md (Python)", "exec"), {})
    namespace = {
        "model": ToolFreeModel(messages=iter([AIMessage(content="It fails in the linker.")])),
        "tools": [],
    }
    exec(compile(blocks[1], "README.md (LangChain)", "exec"), namespace)
    assert namespace["result"]["messages"][-1].content == "It fails in the linker."
    assert "condense_state" in namespace["result"]
