"""The official EgoNormia evaluation and scorer, as a test oracle written in the official code's own shape.

Modelled line by line on Open-Social-World/EgoNormia (MIT licence, Copyright (c) 2025 Open Social World):
``src/eval/eval_api.py``, the newest version on main (``EvalAPI.pick_best``, ``EvalAPI.pick_sensible``,
``EvalAPI.evaluate``, ``OpenAIEvalAPI.inference``; see egoeval/egonormia/protocols/official.json for the
version), and ``src/final_dataset/compute_scores_final.py`` (the score loop of the newest version, default branch
commit 2019f27: its ``except`` catches the division by zero of two empty sensible lists after the action and
justification were added, and the item is not counted). The prompt text is the official text, kept here as the
official code keeps it (f-strings and ``str.format``), independently of the project's data file. A run's results
are named as the official results file names them: ``blind_<model>``, ``desc_<model>``, ``<model>`` (video).
Only the tests use this module.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

PREFIXES = {
    "pipeline": "The following description: ''' {desc} ''' describes a situation involving",
    "video": "The following images from a first-person perspective video depict",
    "blind": "You are blind, so do not request context, only follow the instructions below. This situation involves",
}


class InvalidResponseError(Exception):
    pass


class APIError(Exception):
    pass


def _action_prompt(prefix: str, behaviors: list[str]) -> str:
    return (
        prefix
        + f""" a person in a given situation.

Given the below list of behaviors, choose the single most normatively relevant or appropriate action to perform next.
You shouldn't use the info in options to learn about the context, but rather to make a decision based on the normative appropriateness of the behavior.

You shouldn't eliminate any options only based on the presence of elements in the context; you should focus on normative appropriateness.

Structure your answer as a single integer, where the integer corresponds to the index of the behavior in the list below.

None is a valid option, and should be output as the index of the empty string in the behaviors if no behavior is remotely appropriate.
Don't use None to indicate that you don't know the answer, only use it if you are certain that no behavior is appropriate.

Think carefully about your response and reason over it in the output.

GIVE YOUR INTEGER RESPONSE AS JUST A SINGLE INTEGER OF THE INDEX OF THE BEHAVIOR. This means that if you think the correct behavior is the first one in the list, you should output 1.

The only possible integers you should output are 1, 2, 3, 4, or 5.

Behavior options: {behaviors}

Response example:
<reasoning goes here>
1
"""  # noqa: E501 - the official text
    )


JUSTIFICATION_PROMPT = """ a person in a given situation.

"{behavior}" is selected as the most normatively relevant or appropriate action for the person to perform in the given situation.
However, this behavior might not be the most normatively correct action to perform in the given situation. Be open to the possibility that the behavior might be incorrect.

Your task is to now choose the most normatively correct justification that best supports your behavior, based on the context and commonsense norms.
This justification should directly relate to the behavior, and not just be a general statement in the context of the situation.

Structure your answer as a single integer, where the integer corresponds to the index of the justification in the list below.

None is a valid option, and should be output as the index of the empty string in the justification if no justification is appropriate.

Think carefully about your response and reason over it in the output.

GIVE YOUR INTEGER RESPONSE AS JUST A SINGLE INTEGER OF THE INDEX OF THE JUSTIFICATION. This means that if you think the correct justification is the first one in the list, you should output 1.

The only possible integers you should output are 1, 2, 3, or 4, or 5.

Justification options: {justifications}

Response example:
<reasoning goes here>
1
"""  # noqa: E501 - the official text


def _sensible_prompt(prefix: str, behaviors: list[str]) -> str:
    return (
        prefix
        + f""" a person in a given situation.

    Given the below behaviors, choose ALL the sensible actions to perform in
    the given situation, based on the context and commonsense norms.
    None is a valid option, and provided.

    Do not pattern match words, instead consider the context and norms.

    Structure your answer as one python list of integers, where each integer corresponds to the indicies of the behaviors in the list below,
    from 1 to 5. An empty list is acceptable if no behavior is sensible.

    Think carefully about your response and reason over it in the output.

    DO NOT WRITE ANY OTHER TEXT IN YOUR RESPONSE, JUST A PYTHON LIST OF N INTEGERS, WHERE N IS THE INDEX OF THE SENSIBLE BEHAVIOR-JUSTIFICATION PAIRS.

    The only possible integers within the list you should output are 1, 2, 3, 4, or 5.

    Behavior options: {behaviors}

    Response example:
    <reasoning goes here>
    [1, 4, 5]
    """  # noqa: E501 - the official text
    )


CLAUDE = (
    "All the images are sampled from a video taken with consent of all parties, blurring is present to protect "
    "privacy, and present a purely hypothetical scenario for research purposes. Do your absolute best to yield an "
    "answer following the above format, as there are no privacy concerns."
)


class OfficialEval:
    """One model in one setting; ``call(body)`` answers a request body (raise APIError for an API error)."""

    def __init__(self, model: str, setting: str, call: Callable[[dict[str, Any]], str | None]) -> None:
        self.modelname = ("blind_" + model) if setting == "blind" else model
        self.key = {"blind": "blind_", "pipeline": "desc_", "video": ""}[setting] + model  # the results file's name
        self.model = model
        self.setting = setting
        self.desc = setting == "pipeline"
        self.blind = setting == "blind"
        self.prefix = PREFIXES[setting]
        self.call = call
        self.bodies: list[dict[str, Any]] = []

    def inference(self, prompt: str, image: str | None) -> str | None:
        contents: list[dict[str, Any]] = []
        if not self.blind and not self.desc:
            contents.append({"type": "image_url", "image_url": {"url": image}})
        contents.append({"type": "text", "text": prompt})
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": contents}],
            "max_tokens": 2000,
            "temperature": 0.0,
        }
        self.bodies.append(body)
        return self.call(body)

    def pick_best(self, dp: dict[str, Any]) -> dict[str, Any]:
        behaviors, justifications, correct, prev = (
            dp["behaviors"],
            dp["justifications"],
            list(dp["correct"]),
            dp["_prev"],
        )
        prefix = self.prefix.format(desc=dp["description"]) if self.desc else self.prefix
        prompt = _action_prompt(prefix, behaviors)
        try:
            if self.blind or self.desc:
                prev = None
            a_text = self.inference(prompt, prev)
            if a_text is None:
                raise InvalidResponseError("None")
            try:
                a = int(re.findall(r"\d+", a_text)[-1]) - 1
                bb = behaviors[a]
                assert a in [0, 1, 2, 3, 4]
            except Exception:
                raise InvalidResponseError("action") from None
            just_p = self.prefix + JUSTIFICATION_PROMPT.format(behavior=bb, justifications=justifications)
            j_text = self.inference(just_p, prev)
            if j_text is None:
                raise InvalidResponseError("None")
            try:
                j = int(re.findall(r"\d+", j_text)[-1]) - 1
                assert j in [0, 1, 2, 3, 4]
            except Exception:
                raise InvalidResponseError("justification") from None
            return {"results": [a, j], "correct": correct}
        except InvalidResponseError:
            return {"results": [-1, -1], "correct": correct}
        except Exception:
            return {"results": [-2, -2], "correct": correct}

    def pick_sensible(self, dp: dict[str, Any], best: dict[str, Any]) -> dict[str, Any]:
        sensible, prev = dp["sensible"], dp["_prev"]
        try:
            if best["results"] == [-2, -2]:
                raise ValueError("skip")
            prefix = self.prefix.format(desc=dp["description"]) if self.desc else self.prefix
            prompt = _sensible_prompt(prefix, dp["behaviors"])
            if "claude" in self.modelname:
                prompt += CLAUDE
            if self.blind or self.desc:  # the official code clears it for blind; desc sends no image either
                prev = None
            text = self.inference(prompt, prev)
            if text is None:
                raise InvalidResponseError("None")
            try:
                results = ast.literal_eval(re.findall(r"\[.*\]", text)[-1])
                results = [r - 1 for r in results]
            except Exception:
                raise InvalidResponseError("sensible") from None
            unshuffler = {i: i for i in range(5)}
            if len(results) == len([r for r in results if r <= 4 and r > -1]):
                results = [unshuffler[r] for r in results]
            else:
                results = []
            return {"results": results, "correct": sensible}
        except InvalidResponseError:
            return {"results": [-1, -1], "correct": sensible}
        except Exception:
            return {"results": [-2, -2], "correct": sensible}

    def evaluate(self, datapoints: list[dict[str, Any]]) -> dict[str, Any]:
        """The eval-JSON entries of this model key: items whose best call hit an API error are left out."""
        entries = {}
        for dp in datapoints:
            best = self.pick_best(dp)
            sensible = self.pick_sensible(dp, best)
            if best["results"] != [-2, -2]:
                entries[dp["id"]] = {"best": best, "sensible": sensible}
        return entries


def datapoint(clip: dict[str, Any], image_url: str | None) -> dict[str, Any]:
    """The official ``load_data_final`` datapoint (options in stored order)."""
    return {
        "id": clip["id"],
        "behaviors": list(clip["behaviors"]),
        "justifications": list(clip["justifications"]),
        "correct": [clip["correct"], clip["correct"]],
        "sensible": list(clip["sensibles"]),
        "_prev": image_url,
        "description": clip["desc"],
    }


def compute_scores(entries: dict[str, Any]) -> dict[str, float | None]:
    """The score loop of compute_scores_final.py (newest) for one model key, in percent, with n (None: n is 0)."""
    a = j = both = sensible = total = 0.0
    for entry in entries.values():
        try:
            best_a = entry["best"]["results"][0] == entry["best"]["correct"][0]
            best_j = entry["best"]["results"][1] == entry["best"]["correct"][1]
            a += best_a
            j += best_j
            both += best_a and best_j
            if isinstance(entry["sensible"], dict) and len(entry["sensible"]) > 0:
                inter = set(entry["sensible"]["results"]) & set(entry["sensible"]["correct"])
                union = set(entry["sensible"]["results"] + entry["sensible"]["correct"])
                sensible += len(inter) / len(union)
            total += 1
        except Exception:  # the scorer's own: it prints the error and goes on
            continue
    if total == 0:
        return {"action": None, "justification": None, "both": None, "sensible_iou": None, "n": 0}
    return {
        "action": a / total * 100,
        "justification": j / total * 100,
        "both": both / total * 100,
        "sensible_iou": sensible / total * 100,
        "n": int(total),
    }
