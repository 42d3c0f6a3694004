"""llama.cpp's server (llama-cpp-python) rendering prompts with Gemma 3's chat template.

The shared model server renders SmolLM2's own template, which takes any role anywhere. Gemma's
(google/gemma-3-*-it, tokenizer_config.json), like Mistral's, refuses a conversation whose
roles do not alternate user/assistant after an optional first system message, and llama.cpp's
server and vLLM render the template a model ships with. This serves the same small model with
that template, so that a request condense compacted meets the rule such a server applies.

    python strict-template-server.py MODEL.gguf PORT
"""

import sys

import uvicorn
from llama_cpp import llama_chat_format
from llama_cpp.server.app import create_app
from llama_cpp.server.settings import ModelSettings, ServerSettings

GEMMA3_TEMPLATE = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
"""


def main() -> None:
    model, port = sys.argv[1], int(sys.argv[2])
    formatter = llama_chat_format.Jinja2ChatFormatter(
        template=GEMMA3_TEMPLATE,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        add_generation_prompt=True,
    )
    llama_chat_format.register_chat_completion_handler("gemma3-template")(
        formatter.to_chat_handler()
    )
    app = create_app(
        server_settings=ServerSettings(host="127.0.0.1", port=port),
        model_settings=[
            ModelSettings(
                model=model,
                model_alias="smollm2",
                chat_format="gemma3-template",
                n_ctx=8192,
                verbose=False,
            )
        ],
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
