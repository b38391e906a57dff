"""``parse_files({relative path: text}) -> SquadronConfig`` — pure, no I/O.

Each file is parsed with line numbers (:mod:`.documents`), merged over the documented
defaults (mappings merge key by key; ``null`` removes a default entry; lists replace —
:mod:`.defaults`), validated by its model (:mod:`.problems` puts each error at its line),
then the files are checked against each other (roles, agent definitions, human groups —
:mod:`.references`). Every problem of every file is collected into one
:class:`~squadron.domain.repo_config.errors.ConfigError`. :mod:`.files` runs the whole parse;
:mod:`.result` holds what it gives.
"""

from squadron.config.parse.files import parse_files
from squadron.config.parse.problems import validation_problems
from squadron.config.parse.result import ResolvedRole, SquadronConfig

__all__ = ["ResolvedRole", "SquadronConfig", "parse_files", "validation_problems"]
