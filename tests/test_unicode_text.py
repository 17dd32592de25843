"""Text in other scripts is found again: store, then recall by a word of the memory, through MCP."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from smriti.text import content_words, words
from tests.test_server_stdio import server_command, server_env

# (language, memory, a word of it to recall by)
MEMORIES = [
    ("German", "Die Überweisungen für die Wohnung in München gehen am Monatsende raus.", "Überweisungen"),
    ("German city", "Unser Büro zieht nächstes Jahr von Hamburg nach München.", "München"),
    ("French", "Élodie préfère le café crème après la réunion du lundi.", "réunion"),
    ("Russian", "Ярослав переезжает в Новосибирск осенью.", "Новосибирск"),
    ("Chinese", "我最喜欢吃的是北京烤鸭。", "烤鸭"),
    ("Japanese", "私は週末に寿司を食べるのが好きです。", "寿司"),
    ("Hindi", "प्रिया को मसाला डोसा बहुत पसंद है।", "प्रिया"),
    ("English", "Carol bakes sourdough bread every Sunday morning.", "sourdough"),
]


def test_words_keep_every_script():
    assert words("München") == ["München"]  # was "M", "nchen"
    assert words("Überweisungen") == ["Überweisungen"]
    assert words("प्रिया") == ["प्रिया"]  # vowel signs and virama are marks, not separators
    assert words("寿司が好き") == ["寿司", "司が", "が好", "好き"]
    assert words("Tokyo東京") == ["Tokyo", "東京"]
    assert content_words("北") == ["北"]  # a single CJK character is a word
    # The possessive goes whether the text has CJK or not (two paths: a regex per word for CJK).
    assert words("Caroline's dog met Melanie's") == ["Caroline", "dog", "met", "Melanie"]
    assert words("Caroline's 寿司") == ["Caroline", "寿司"]
    assert words("JOHN'S") == ["JOHN'S"]  # only a lower-case 's is a possessive
    # decomposed and composed umlauts are the same word
    assert content_words("Mu\u0308nchen") == content_words("M\u00fcnchen") == ["münchen"]


@pytest.mark.parametrize("mode", ["recall", "search"])
def test_recall_by_a_word_in_six_scripts_through_mcp(tmp_path, mode):
    command = server_command()
    # The default dimension: at the suite's 64, hashed words collide and vector-only search is noise.
    env = {**server_env(tmp_path), "EMBEDDING_DIMS": "1536"}
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)

    async def main() -> None:
        async with Client(stdio_client(params)) as client:
            ids = {}
            for language, text, _ in MEMORIES:
                stored = await client.call_tool("smriti_store", {"content": text})
                assert not stored.is_error, (language, stored.content)
                ids[language] = stored.structured_content["id"]
            for language, _text, word in MEMORIES:
                result = await client.call_tool("smriti_recall", {"query": word, "limit": 3, "mode": mode})
                found = [item["id"] for item in result.structured_content["results"]]
                assert found and found[0] == ids[language], (language, word, result.structured_content)

    anyio.run(main)
