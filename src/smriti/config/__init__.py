"""Settings: every environment variable Smriti reads, validated once at start.

:class:`Settings` (``settings.py``) inherits one section class per concern (``storage.py``,
``models.py``, ``server.py``, ``lifecycle.py``, ``recall.py``), so fields stay flat attributes
while ``smriti config`` and the generated ``docs/settings.md`` (``reference.py``) show them by
section. Add a setting to the section it concerns, with a ``description=`` that says what it
does and why its default is what it is.
"""

from smriti.config.settings import (
    SECTIONS,
    Settings,
    env_names,
    format_validation_error,
    load_settings,
    setting_env_names,
)
from smriti.config.storage import DEFAULT_VECTOR_INDEX_DTYPE
from smriti.errors import SettingsError, default_user, validate_user_name

__all__ = [
    "DEFAULT_VECTOR_INDEX_DTYPE",
    "SECTIONS",
    "Settings",
    "SettingsError",
    "default_user",
    "env_names",
    "format_validation_error",
    "load_settings",
    "setting_env_names",
    "validate_user_name",
]
