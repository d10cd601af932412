"""`python -m mn_harness.results FILE...`: rewrite the generated summary.json table of each docs
page (results.schema.summary_docs); without FILE, print the table."""

import sys
from pathlib import Path

from mn_harness.results.records import markdown
from mn_harness.results.schema import RunSummary, summary_docs

for name in sys.argv[1:]:
    page = Path(name)
    page.write_text(summary_docs(page.read_text()))
if len(sys.argv) < 2:
    print(markdown(RunSummary))
