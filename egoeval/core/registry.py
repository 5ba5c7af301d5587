"""One registry type for every kind of named part: backends, EgoNormia's protocols, EgoHumans' evaluators and
trackers, the benchmarks themselves.

A :class:`Registry` maps names to things of one kind. A thing is registered as itself or as the place it lives
(``module:attribute``, imported when first asked for), or a registry finds its names as the modules of a package
(:meth:`Registry.modules`, read from the folder without importing the package): reading the names, as the settings'
validators and every ``--help`` do, imports nothing heavy. The settings derive each allowed-names check and its JSON
schema ``enum`` from a registry (``egoeval.core.settings.registered``), so registering a thing makes its name valid.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import threading
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from egoeval.core.errors import UnknownName

T = TypeVar("T")


class Registry(Generic[T]):
    """Things of one ``kind`` by name: ``register``, ``get``, ``names``; an unknown name raises UnknownName (a
    ValueError) naming it and the known ones."""

    def __init__(self, kind: str, discover: Callable[[], dict[str, Callable[[], T]]] | None = None) -> None:
        self.kind = kind
        self._discover = discover
        self._loaders: dict[str, Callable[[], T]] | None = None if discover else {}
        self._loaded: dict[str, T] = {}
        self._lock = threading.Lock()

    @classmethod
    def modules(cls, kind: str, package: str, attribute: str) -> Registry[T]:
        """One thing per module of ``package``, named as its module: the module's ``attribute``, whose ``name``
        must be the module's (the package itself is not imported to read the names)."""

        def discover() -> dict[str, Callable[[], T]]:
            spec = importlib.util.find_spec(package)  # imports the parent packages only
            folders = list(spec.submodule_search_locations or []) if spec else []
            return {
                module.name: cls.module_loader(f"{package}.{module.name}", attribute, module.name)
                for module in sorted(pkgutil.iter_modules(folders), key=lambda m: m.name)
                if not module.name.startswith("_")
            }

        return cls(kind, discover)

    def _entries(self) -> dict[str, Callable[[], T]]:
        with self._lock:
            if self._loaders is None:
                self._loaders = dict(self._discover()) if self._discover else {}
            return self._loaders

    def register(self, name: str, thing: T) -> T:
        """Register ``thing`` under ``name`` (replacing what was there); returns it."""
        self._entries()[name] = lambda: thing
        self._loaded.pop(name, None)
        return thing

    def register_lazy(self, name: str, target: str) -> None:
        """Register the thing at ``module:attribute``, imported when it is first asked for (a thing with a ``name``
        must be named ``name``)."""
        module, attribute = target.split(":")
        self._entries()[name] = self.module_loader(module, attribute, name)
        self._loaded.pop(name, None)

    def unregister(self, name: str) -> None:
        """Forget ``name`` (a test's registration, when the test ends)."""
        self._entries().pop(name, None)
        self._loaded.pop(name, None)

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order (a package's modules: by name); nothing is imported."""
        return tuple(self._entries())

    def __contains__(self, name: object) -> bool:
        return name in self._entries()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries())

    def check(self, name: str) -> str:
        """``name`` when it is registered, else UnknownName naming it and the known ones (a settings validator)."""
        if name not in self._entries():
            raise UnknownName(self.kind, name, self.names())
        return name

    def get(self, name: str) -> T:
        """The thing registered as ``name`` (imported on first use)."""
        loader = self._entries().get(self.check(name))
        if name not in self._loaded:
            assert loader is not None
            self._loaded[name] = loader()
        return self._loaded[name]

    def items(self) -> list[tuple[str, T]]:
        """Every name with its thing (imports them all)."""
        return [(name, self.get(name)) for name in self.names()]

    @staticmethod
    def module_loader(module: str, attribute: str, name: str | None = None) -> Callable[[], T]:
        """A loader of ``module``'s ``attribute``; with ``name``, the thing's own ``name`` must be that."""

        def load() -> T:
            found: T = getattr(importlib.import_module(module), attribute)
            if name is not None and getattr(found, "name", name) != name:
                raise TypeError(f"{module}.{attribute} is named {getattr(found, 'name', None)!r}, not {name!r}")
            return found

        return load
