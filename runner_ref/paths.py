"""``artifactRoots`` containment for ``/api/files/download`` (protocol 1 §3 http), sans-IO
apart from ``realpath``.

Rules, in order (any failure → 403 ``runner_artifact_forbidden``):
1. an empty ``artifactRoots`` refuses every export;
2. the requested path is a non-empty string of at most 4096 chars, absolute, with no NUL or
   control character and no ``..`` component (even one that would resolve inside a root);
3. its realpath (every symlink followed) exists and is a regular file;
4. that realpath sits inside the realpath of one of the roots (path-component containment, not a
   string prefix: ``/srv/a`` does not contain ``/srv/ab``).
The realpath is what is then asked of Hermes, so a link swapped later is not followed twice.
"""
from __future__ import annotations

import os
import re

from . import codes
from .errors import CommandError

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _forbidden() -> CommandError:
    return CommandError.of(codes.ARTIFACT_FORBIDDEN)


def contained_path(requested: object, roots: tuple[str, ...] | list[str]) -> str:
    """The real path to export, or raise 403 ``runner_artifact_forbidden``."""
    if not roots:
        raise _forbidden()
    if not isinstance(requested, str) or not requested or len(requested) > 4096:
        raise _forbidden()
    if _CONTROL.search(requested) or not os.path.isabs(requested) or requested.startswith("//"):
        raise _forbidden()
    if ".." in requested.replace("\\", "/").split("/"):
        raise _forbidden()
    real = os.path.realpath(requested)
    if not os.path.isfile(real):
        raise _forbidden()
    for root in roots:
        real_root = os.path.realpath(root)
        if not os.path.isdir(real_root):
            continue
        try:
            if os.path.commonpath([real_root, real]) == real_root and real != real_root:
                return real
        except ValueError:
            continue
    raise _forbidden()
