"""Compiles documents through a client that openapi-python-client generated from the live
API's /openapi.json: proof that the OpenAPI document is one a code generator can use, as
JSON and as multipart. Run by ./dev/test with TEXFLEET_URL, TEXFLEET_TOKEN, TEXFLEET_PROJECT
and the generated package on PYTHONPATH; exits non-zero on any surprise."""

import hashlib
import io
import os
import subprocess
import sys
import tempfile
from uuid import UUID

from texfleet_client import AuthenticatedClient
from texfleet_client.api.compile_ import get_job, get_log, get_pdf, submit
from texfleet_client.api.files import missing, put_file
from texfleet_client.models import (
    CompileMetadata,
    Engine,
    HashList,
    InlineDocument,
    Job,
    JobStatus,
    MissingFiles,
    MultipartBody,
    NamedFile,
    ProblemBody,
    TextFile,
)
from texfleet_client.types import File


def pdf_text(pdf: bytes) -> str:
    with tempfile.NamedTemporaryFile(suffix=".pdf") as handle:
        handle.write(pdf)
        handle.flush()
        return subprocess.run(
            ["pdftotext", handle.name, "-"], check=True, capture_output=True, text=True
        ).stdout


def finish(client: AuthenticatedClient, job: Job) -> Job:
    while job.status in (JobStatus.QUEUED, JobStatus.RUNNING):
        job = get_job.sync(job.id, client=client, prefer="wait=60")
        assert isinstance(job, Job), job
    return job


def main() -> None:
    client = AuthenticatedClient(
        base_url=os.environ["TEXFLEET_URL"], token=os.environ["TEXFLEET_TOKEN"], timeout=90
    )
    project = UUID(os.environ["TEXFLEET_PROJECT"])
    marker = f"generated-{os.getpid()}"

    # JSON: the main document inline, a chapter beside it.
    body = InlineDocument(
        project_id=project,
        input_latex="\\documentclass{article}\\begin{document}From a generated client: \\input{part}\\end{document}",
        engine=Engine.XELATEX,
        cache=False,
        files=[TextFile(path="part.tex", content=marker)],
    )
    job = submit.sync(client=client, body=body, idempotency_key=marker)
    assert isinstance(job, Job), job
    job = finish(client, job)
    assert job.status == JobStatus.SUCCEEDED, job
    pdf = get_pdf.sync_detailed(job.id, client=client)
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF"), pdf.status_code
    text = pdf_text(pdf.content)
    assert marker in text, text
    log = get_log.sync(job.id, client=client)
    assert isinstance(log, str) and "XeTeX" in log, log

    # Multipart: the files as they are, the main document named among them.
    metadata = CompileMetadata(project_id=project, main="paper/main.tex", cache=False)
    files = [
        File(payload=io.BytesIO(b"\\documentclass{article}\\begin{document}Multipart \\input{macros}\\end{document}"), file_name="paper/main.tex"),
        File(payload=io.BytesIO(marker.encode()), file_name="macros.tex"),
    ]
    job = submit.sync(client=client, body=MultipartBody(metadata=metadata, file=files))
    assert isinstance(job, Job), job
    job = finish(client, job)
    assert job.status == JobStatus.SUCCEEDED, job
    pdf = get_pdf.sync_detailed(job.id, client=client)
    assert marker in pdf_text(pdf.content)

    # By hash: asked, uploaded once, named.
    part = f"By hash: {marker}".encode()
    sha = hashlib.sha256(part).hexdigest()
    asked = missing.sync(project, client=client, body=HashList(sha256=[sha]))
    assert isinstance(asked, MissingFiles) and asked.missing == [sha], asked
    stored = put_file.sync_detailed(project, sha, client=client, body=File(payload=io.BytesIO(part)))
    assert stored.status_code == 201, stored
    body = InlineDocument(
        project_id=project,
        input_latex="\\documentclass{article}\\begin{document}\\input{part}\\end{document}",
        cache=False,
        files=[NamedFile(path="part.tex", sha256=sha)],
    )
    job = finish(client, submit.sync(client=client, body=body))
    assert job.status == JobStatus.SUCCEEDED, job
    assert f"By hash: {marker}" in pdf_text(get_pdf.sync_detailed(job.id, client=client).content)

    # An error is a typed problem with its code.
    problem = submit.sync(
        client=client, body=InlineDocument(project_id=project, input_latex="x", timeout_seconds=0)
    )
    assert isinstance(problem, ProblemBody), problem
    assert problem.code.value == "validation_failed", problem
    print(f"the generated client compiled {marker} as JSON, as multipart and by hash")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as failure:
        print(f"generated client: {failure!r}", file=sys.stderr)
        raise
