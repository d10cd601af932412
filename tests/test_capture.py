import pytest

from mn_harness.capture import SNAPLEN, parse_links, tcpdump_argv
from mn_harness.config import ConfigError, Experiment
from tests.helpers import small_demo


def test_links_by_either_end_order_or_direction():
    exp = Experiment.from_dict(small_demo())
    assert [link.name for link in parse_links("s2-s1,h1-s1, s1->s2", exp)] == ["s1-s2", "h1-s1"]
    assert [link.name for link in parse_links(["s2-h3"], exp)] == ["s2-h3"]


@pytest.mark.parametrize("text", ["s1-s3", "s1", "h1-s1-s2", "", ","])
def test_an_unknown_link_is_one_line_naming_the_option(text):
    with pytest.raises(ConfigError) as err:
        parse_links(text, Experiment.from_dict(small_demo()))
    assert err.value.path == "--pcap" and "\n" not in str(err.value)


def test_tcpdump_keeps_headers_and_writes_as_root():
    argv = tcpdump_argv("s1-eth3", "/x/pcap/s1-s2.pcap")
    assert argv[:3] == ["tcpdump", "-i", "s1-eth3"] and argv[argv.index("-s") + 1] == str(SNAPLEN)
    assert argv[argv.index("-Z") + 1] == "root" and argv[-2:] == ["-w", "/x/pcap/s1-s2.pcap"]
