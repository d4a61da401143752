"""The lab's grading helpers: a second top-level package of the adapter's distribution, as
a lab's shared code often is, so that the adapter's identity is shown to cover every
package its distribution installs, not only the adapter's own."""

from __future__ import annotations

# The server's grades are shares already; a lab whose server scores in points 0-100 sets
# 100 here.
POINTS_PER_SHARE = 1.0
