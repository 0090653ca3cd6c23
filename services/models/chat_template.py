"""The zoo tokenizer's control tokens and its ChatML chat template (a compact Qwen3-style one).

Differences from Qwen3's template, on purpose: the tool preamble is shorter (tiny models pay for
every prompt token), and assistant messages are rendered verbatim in every position (Qwen3 keeps
``<think>`` reasoning only after the last user query), so a whole-conversation rendering equals
the incremental token ids the rollout worker builds (``services.agent.chat_format``).
"""

PAD = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
# Control tokens: never produced by the BPE merges, skipped by decode(skip_special_tokens=True).
SPECIAL_TOKENS = (PAD, IM_START, IM_END)
# Atomic markup tokens the model writes itself (Qwen3 also keeps these non-special).
MARKUP_TOKENS = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")

CHAT_TEMPLATE = """\
{%- if messages[0].role == 'system' %}
    {%- set system_message = messages[0].content %}
    {%- set rest = messages[1:] %}
{%- else %}
    {%- set system_message = none %}
    {%- set rest = messages %}
{%- endif %}
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if system_message is not none %}{{- system_message + '\\n\\n' }}{%- endif %}
    {{- '# Tools\\n<tools>' }}
    {%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}
    {{- '\\n</tools>\\nCall a tool with <tool_call>\\n' }}
    {{- '{"name": <name>, "arguments": <json object>}\\n</tool_call>' }}
    {{- '<|im_end|>\\n' }}
{%- elif system_message is not none %}
    {{- '<|im_start|>system\\n' + system_message + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in rest %}
    {%- if message.role == 'user' %}
        {{- '<|im_start|>user\\n' + message.content + '<|im_end|>\\n' }}
    {%- elif message.role == 'assistant' %}
        {{- '<|im_start|>assistant\\n' + (message.content or '') }}
        {%- for call in (message.tool_calls or []) %}
            {%- set call = call.function if call.function is defined else call %}
            {{- '<tool_call>\\n{"name": "' + call.name + '", "arguments": ' + (call.arguments | tojson) }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == 'tool' %}
        {{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}
    {%- else %}
        {{- raise_exception('unsupported message role: ' + message.role) }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}
"""
