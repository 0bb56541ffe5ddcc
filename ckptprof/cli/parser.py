"""The argument parser every subcommand gets: a usage error is one line that names the flag and the value, a
did-you-mean when a close spelling exists, and where the help is - not the full usage block, which buries the one
line that matters under a dozen others (`ckptprof run --help` prints it)."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterable
from typing import Any, NoReturn

# Words users reach for that ckptprof spells otherwise; suggested when the word it means is among the choices.
VALUE_SYNONYMS = {
    "hot": "warm",
    "cached": "warm",
    "drop": "cold",
    "dropped": "cold",
    "asis": "as-is",
    "markdown": "md",
    "text": "table",
}


def suggestion(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``word`` most likely meant: a known synonym, else the closest spelling (difflib), else None."""
    options = [str(c) for c in candidates]
    meant = VALUE_SYNONYMS.get(word.lower())
    if meant in options:
        return meant
    lowered = {o.lower(): o for o in options}
    if word.lower() in lowered:
        return lowered[word.lower()]
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return close[0] if close else None


class UsageProblem(argparse.ArgumentError):
    """An argparse error that knows what to suggest (argparse's own carries only its text)."""

    def __init__(self, action: argparse.Action | None, message: str, hint: str | None) -> None:
        super().__init__(action, message)
        self.hint = hint


class CliParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are one line and a hint; subparsers are made of this class too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Errors come back as exceptions, so the one that knows its hint (``UsageProblem``) keeps it.
        kwargs.setdefault("exit_on_error", False)
        super().__init__(*args, **kwargs)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is None or value in choices:
            return
        names = [str(c) for c in choices]
        meant = suggestion(str(value), names) if isinstance(value, str) else None
        flag = _flag(action)
        if isinstance(action, argparse._SubParsersAction):
            raise UsageProblem(
                None, f"unknown command {value!r} (choose from {', '.join(names)})", meant and f"{meant}"
            )
        raise UsageProblem(
            action,
            f"invalid choice: {value!r} (choose from {', '.join(names)})",
            meant and (f"{flag} {meant}" if flag else meant),
        )

    def parse_known_args(  # type: ignore[override]
        self, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        try:
            return super().parse_known_args(args, namespace)
        except argparse.ArgumentError as exc:
            # Raised in this parser's own parse (a subparser's too: it is named `ckptprof run`).
            self.refuse(str(exc), exc.hint if isinstance(exc, UsageProblem) else None)

    def error(self, message: str) -> NoReturn:
        self.refuse(message, None)

    def refuse(self, message: str, meant: str | None) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        see = f"see `{self.prog} --help`"
        print(f"did you mean {meant}? {see}" if meant else see, file=sys.stderr)
        raise SystemExit(2)

    def refuse_unrecognized(self, extras: list[str]) -> NoReturn:
        """Flags this (sub)parser does not know: the first, with the closest flag it has."""
        first = extras[0]
        word = first.split("=", 1)[0]
        flags = [s for a in self._actions for s in a.option_strings if s.startswith("--")]
        meant = suggestion(word, flags) if word.startswith("-") else None
        what = "argument" if len(extras) == 1 else f"arguments ({len(extras)})"
        self.refuse(f"unrecognized {what}: {' '.join(extras)}", meant)


def _flag(action: argparse.Action) -> str:
    """The long spelling of an option (``--cache``), '' for a positional."""
    longs = [s for s in action.option_strings if s.startswith("--")]
    return (longs or action.option_strings or [""])[0]
