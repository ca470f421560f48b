"""A named table of interchangeable parts (topologies, scorers, agent kinds, optimizer methods, executors,
the APIs of each API set): the one way the package registers a kind of part.

Choices, help texts and error messages are all read from the table, so adding a
part is registering it, nowhere else.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


def import_submodules(package: str, path, skip: tuple[str, ...] = ()) -> None:
    """Import every module of a package so each registers its parts, in name order.

    `pkgutil.iter_modules` lists in the file system's order, which differs between
    machines; registration order shows in choices, help and the docs' settings table.
    """
    for name in sorted(module.name for module in pkgutil.iter_modules(path)):
        if name not in skip:
            importlib.import_module(f"{package}.{name}")


@dataclass(frozen=True)
class Entry(Generic[T]):
    name: str
    value: T
    help: str
    aliases: tuple[str, ...] = ()


class Registry(Generic[T]):
    def __init__(self, kind: str, option: str, sort: bool = False) -> None:
        self.kind = kind  #: what an entry is, for messages ("topology")
        self.option = option  #: the option that picks one, for messages ("--apibank-topology")
        self.sort = sort  #: list entries by name (where modules register in whatever order they are imported)
        self._entries: dict[str, Entry[T]] = {}
        self._aliases: dict[str, str] = {}
        self._loader: Callable[[], None] | None = None

    def load_with(self, loader: Callable[[], None]) -> None:
        """A function that imports the modules that register entries (run once, when first read)."""
        self._loader = loader

    def _load(self) -> None:
        loader, self._loader = self._loader, None
        if loader is not None:
            loader()

    def register(self, name: str, help: str, aliases: tuple[str, ...] = ()) -> Callable[[T], T]:
        """A decorator that adds what it decorates under `name`."""
        def add(value: T) -> T:
            return self.add(name, value, help, aliases)
        return add

    def add(self, name: str, value: T, help: str, aliases: tuple[str, ...] = ()) -> T:
        """Add `value` under `name`; what a part is beyond its name and help is the value's own typed
        fields (a topology's `TopologySpec`, an API's `ApiScoring`), never an untyped side table."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = Entry(name, value, help, aliases)
        for alias in aliases:
            self._aliases[alias] = name
        return value

    def names(self) -> list[str]:
        """The registered names, then their aliases (everything an option accepts)."""
        names = [entry.name for entry in self]
        return names + (sorted(self._aliases) if self.sort else list(self._aliases))

    def entry(self, name: str) -> Entry[T]:
        self._load()
        key = self._aliases.get(name, name)
        try:
            return self._entries[key]
        except KeyError:
            from apibank_bench.core.settings import spoken

            raise ValueError(f"{spoken(self.option)}: unknown {self.kind} {name!r}; expected one of "
                             f"{', '.join(entry.name for entry in self)}") from None

    def get(self, name: str) -> T:
        return self.entry(name).value

    def has(self, name: str) -> bool:
        """Whether `name` (or an alias) is registered."""
        self._load()
        return name in self._entries or name in self._aliases

    def __iter__(self) -> Iterator[Entry[T]]:
        self._load()
        entries = list(self._entries.values())
        return iter(sorted(entries, key=lambda entry: entry.name) if self.sort else entries)
