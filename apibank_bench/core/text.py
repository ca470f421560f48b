"""Text a model may send that UTF-8 cannot carry."""

from __future__ import annotations

import re

#: Lone UTF-16 surrogates: a legal JSON escape (`"\ud800"`) that no UTF-8 encoder accepts.
SURROGATES = re.compile("[\ud800-\udfff]")
