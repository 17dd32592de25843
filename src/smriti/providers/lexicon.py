"""Curated word lists that type the offline analyser's cues as a person would (issue 36, item 4).

Capitalisation alone said "person" for ``Fridays``, ``PostgreSQL``, ``DuckDB`` and ``American``.
An offline NER model would do better still, but none ships with a package here (spaCy's small
English pipeline and GLiNER's weights are downloads, not wheels), so these lists settle the
common cases: days and months are times, nationalities and languages are not people, and
products and technologies are technologies. Lists, not rules, so a wrong type is fixed by one
word. ``tests/test_cue_types.py`` measures the typing on a labelled sample.
"""

from __future__ import annotations

import re

DAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday".split())
MONTHS = frozenset(
    "january february march april may june july august september october november december".split()
)

# Adjectives of nations and peoples, which are also the names of many languages.
NATIONALITIES = frozenset(
    """
    afghan albanian algerian american andorran angolan argentine argentinian armenian australian
    austrian azerbaijani bahamian bahraini bangladeshi barbadian belarusian belgian belizean
    beninese bhutanese bolivian bosnian botswanan brazilian british bruneian bulgarian burmese
    burundian cambodian cameroonian canadian chadian chilean chinese colombian congolese
    croatian cuban cypriot czech danish dominican dutch ecuadorian egyptian emirati english
    eritrean estonian ethiopian fijian filipino finnish french gabonese gambian georgian german
    ghanaian greek grenadian guatemalan guinean guyanese haitian honduran hungarian icelandic
    indian indonesian iranian iraqi irish israeli italian ivorian jamaican japanese jordanian
    kazakh kenyan korean kosovan kuwaiti kyrgyz laotian latvian lebanese liberian libyan
    lithuanian luxembourgish macedonian malagasy malawian malaysian maldivian malian maltese
    mauritanian mauritian mexican moldovan monegasque mongolian montenegrin moroccan mozambican
    namibian nepalese nepali nicaraguan nigerian nigerien norwegian omani pakistani palestinian
    panamanian paraguayan persian peruvian polish portuguese qatari romanian russian rwandan
    salvadoran samoan saudi scottish senegalese serbian singaporean slovak slovakian slovenian
    somali spanish sri-lankan sudanese surinamese swazi swedish swiss syrian taiwanese tajik
    tanzanian thai togolese tongan trinidadian tunisian turkish turkmen ugandan ukrainian
    uruguayan uzbek venezuelan vietnamese welsh yemeni zambian zimbabwean
    african asian european latin latino latina hispanic arab arabic nordic scandinavian
    caribbean balkan slavic celtic anglo
    hindi urdu bengali punjabi tamil telugu marathi gujarati kannada malayalam mandarin cantonese
    hebrew yiddish swahili tagalog esperanto latin sanskrit farsi catalan basque galician
    """.split()
)

# Products and technologies often written capitalised or in camel case. Lower case here; a
# camel-cased word (PostgreSQL, DuckDB, GitHub, JavaScript) is recognised without a list.
TECHNOLOGIES = frozenset(
    """
    python java javascript typescript rust golang kotlin scala ruby php perl haskell elixir
    erlang clojure lua julia fortran cobol c++ c# dart matlab bash zsh powershell sql nosql
    html css sass graphql grpc rest json yaml toml xml protobuf markdown latex
    linux unix ubuntu debian fedora centos windows macos ios android freebsd
    postgres postgresql mysql mariadb sqlite mongodb cassandra redis memcached elasticsearch
    opensearch kafka rabbitmq nats zookeeper etcd neo4j falkordb kuzu duckdb
    clickhouse snowflake bigquery redshift databricks spark hadoop trino airflow dbt
    flink pulsar qdrant pinecone weaviate milvus pgvector faiss lancedb
    docker podman kubernetes k8s helm terraform ansible openshift istio envoy
    nginx apache caddy traefik haproxy cloudflare vercel netlify heroku supabase firebase
    aws gcp azure s3 ec2 fargate cloudrun
    react vue angular svelte nextjs nuxt django flask fastapi rails laravel
    node nodejs deno webpack vite babel eslint prettier jest pytest junit selenium cypress
    playwright storybook tailwind bootstrap jquery redux
    numpy pandas scipy pytorch tensorflow keras jax sklearn scikit-learn huggingface langchain
    langgraph llamaindex openai anthropic chatgpt gpt ollama vllm
    git github gitlab bitbucket jenkins circleci travis jira confluence slack discord
    notion figma trello asana sentry datadog grafana prometheus kibana splunk
    pagerduty okta auth0 stripe twilio shopify salesforce hubspot zendesk
    vscode vim neovim emacs intellij pycharm xcode windsurf jupyter colab
    excel photoshop illustrator blender unreal
    iphone ipad macbook playstation xbox nintendo
    """.split()
)

# A word with a capital after a small letter inside it: PostgreSQL, DuckDB, GitHub, iPhone.
# "McDonald" and "MacArthur" are names, so Mc/Mac before the capital does not count.
_CAMEL = re.compile(r"^(?!Ma?c[A-Z])[A-Za-z]*[a-z][A-Z][A-Za-z0-9]*$")


def time_word(word: str) -> str | None:
    """The day or month ``word`` names, plurals included ("Fridays" -> "friday"), else None."""
    lowered = word.casefold()
    for form in (lowered, lowered.removesuffix("s")):
        if form in DAYS or form in MONTHS:
            return form
    return None


def word_type(word: str) -> str | None:
    """The type a capitalised single ``word`` has wherever it stands: time, nationality,
    technology; None when only its place in the sentence can tell (a person, a place)."""
    if time_word(word):
        return "time"
    lowered = word.casefold()
    if lowered in NATIONALITIES:
        return "nationality"
    if lowered in TECHNOLOGIES or _CAMEL.match(word):
        return "technology"
    return None
