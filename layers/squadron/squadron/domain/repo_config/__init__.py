"""The repository configuration's data model: what ``.squadron/`` may say, as pure types.

Models, limits, globs, flow resolution and the named problems of an invalid configuration
live here, in the domain; reading and parsing the files (YAML, front matter, the default
branch through GitHub) is :mod:`squadron.config`'s, which builds these.
"""
