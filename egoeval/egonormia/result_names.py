"""The official results' name of a model's run in a setting: the model keys of an EgoNormia eval JSON.

The official results name a run ``blind_<model>`` (blind setting), ``desc_<model>`` (pipeline) or ``<model>``
(video); ``results_key`` names one, ``setting_of`` reads a name back. The settings refuse a model whose video run's
name would read back as another setting.
"""

from __future__ import annotations

RESULTS_PREFIXES = (("blind_", "blind"), ("desc_", "pipeline"))  # the official results' run names; video: bare


def setting_of(model_key: str) -> tuple[str, str]:
    """(setting, model name) of an official eval-JSON model key: ``blind_<name>``, ``desc_<name>``, ``<name>``."""
    for prefix, setting in RESULTS_PREFIXES:
        if model_key.startswith(prefix):
            return setting, model_key[len(prefix) :]
    return "video", model_key


def results_key(setting: str, model: str) -> str:
    """The official results' name of a model's run in a setting (``setting_of`` reads it back); ValueError when
    the name would read back as another setting (a video model named ``blind_…`` or ``desc_…``)."""
    key = next((prefix + model for prefix, named in RESULTS_PREFIXES if named == setting), model)
    if setting_of(key) != (setting, model):
        raise ValueError(
            f"model {model!r} in the {setting} setting would be named {key!r} in the official results, which reads "
            f"as the {setting_of(key)[0]} setting: rename the model (its name may not start with "
            f"{' or '.join(prefix for prefix, _ in RESULTS_PREFIXES)})"
        )
    return key
