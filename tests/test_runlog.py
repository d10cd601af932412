from mn_harness.runlog import HARNESS_LOG, RunLog, append_to_log


def test_messages_before_the_folder_exists_are_kept_and_sections_appended(tmp_path):
    printed = []
    log = RunLog(printed.append)
    log("data plane: auto -> linux")
    log.attach(tmp_path)
    log("two\nlines")
    (tmp_path / "w.stderr").write_text("Traceback ...\nValueError: x\n")
    log.append_file("worker job1 rank 0", tmp_path / "w.stderr")
    log.append_file("missing", tmp_path / "nope")
    log.close()
    append_to_log(tmp_path, "job  cc\njob1 reno")
    text = (tmp_path / HARNESS_LOG).read_text()
    assert printed == ["data plane: auto -> linux", "two\nlines"]
    lines = text.splitlines()
    assert lines[0].endswith(" data plane: auto -> linux") and lines[2].endswith(" lines")
    assert "===== worker job1 rank 0 =====\nTraceback ...\nValueError: x\n" in text
    assert "missing" not in text and text.endswith("job1 reno\n")


def test_a_silent_log_still_writes_the_file(tmp_path):
    log = RunLog(None)
    log.attach(tmp_path)
    log("only in the file")
    log.close()
    assert "only in the file" in (tmp_path / HARNESS_LOG).read_text()
