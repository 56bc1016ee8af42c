"""hccn_tool outputs and /etc/hccn.conf on real samples."""

from __future__ import annotations

import pytest

from ascend_ready.checks.parsers.hccn import (
    parse_hccn_collection,
    parse_hccn_fec,
    parse_hccn_gateway,
    parse_hccn_ip,
    parse_hccn_link,
    parse_hccn_link_stat,
    parse_hccn_lldp,
    parse_hccn_net_health,
    parse_hccn_netdetect,
    parse_hccn_optical,
    parse_hccn_ping,
    parse_hccn_stat,
    parse_hccn_tls,
    parse_per_device,
)
from ascend_ready.checks.parsers.hccn_conf import parse_hccn_conf
from ascend_ready.errors import ParseError

OPTICAL = """optical info:
present              : present
temperature          : 47 C
vendor name          : Hisense
vendor part number   : LMQ8611-PC+
Vcc                  : 3262.90 mV
Tx Power0            : 4.4035 mW
Rx Power0            : 1.0189 mW
Tx Power1            : 1.3968 mW
Rx Power1            : 0.0054 mW
TxPower Low Thres    : 0.2818 mW
RxPower Low Thres    : 0.1445 mW
Tx Bias0             : 7.9360 mA
Rx Los Flag          : 0xff
Host SNR Lane0       : not supported
Media SNR Lane0      : 23.1211 dB
"""


def test_link_and_net_health():
    assert parse_hccn_link("link status: UP\n").status == "UP"
    assert parse_hccn_link("$ hccn_tool -i 5 -link -g\nlink status: DOWN\n").device_id == 5


def test_net_health_socket_failed_sample(sample):
    health = parse_hccn_net_health(sample("hccn_tool-net_health-g_socket-failed_mindcluster-faultdiag.txt"))
    assert (health.status, health.healthy) == ("Socket failed", False)
    assert parse_hccn_net_health("net health status: Success\n").healthy is True


def test_ip_loop_sample_per_device(sample):
    ips = parse_per_device("hccn-ip", sample("hccn_tool-ip-g-loop_8npu_mindcluster-faultdiag-worker9.txt"))
    assert sorted(ips) == list(range(8))
    assert ips[0].address == "192.1.45.172" and ips[7].address == "192.4.32.120"
    assert {ip.netmask for ip in ips.values()} == {"255.255.0.0"}
    assert all(ip.device_id == dev for dev, ip in ips.items())


def test_ip_unset_is_a_result_not_an_error():
    ip = parse_hccn_ip("Get ipconf failed, because no ip was preset there!\n")
    assert (ip.address, ip.netmask) == (None, None)


def test_ip_garbled_address_names_line():
    with pytest.raises(ParseError) as err:
        parse_hccn_ip("ipaddr:192.1.45.999\nnetmask:255.255.0.0\n")
    assert err.value.line_no == 1


def test_collection_sample_ip_stat_and_link_stat(sample):
    text = sample("collection_8npu_23.0.7_mindcluster-faultdiag-worker0-before.txt")
    # the hccn_tool part of the collection (it starts with version files and pip lines)
    hccn = text[text.index("/usr/local/Ascend/driver/tools/hccn_tool -i 0 -ip -g"):]
    collection = parse_hccn_collection(hccn)
    assert len(collection.entries) == 24
    assert {e.kind for e in collection.entries} == {"hccn-ip", "hccn-stat", "hccn-link-stat"}
    assert [collection.get("hccn-ip", i).address for i in range(8)] == [f"10.10.0.1{i}" for i in range(8)]
    stat = collection.get("hccn-stat", 3)
    assert stat.counters == {"roce_rx_err_pkt_num": 0, "roce_tx_err_pkt_num": 0}
    # the typo'd echo 'usr/local/...' (no leading slash) still names device 0
    link = collection.get("hccn-link-stat", 0)
    assert link.device_id == 0 and link.current_time == "Wed Aug  2 03:09:26 2022"
    assert collection.get("hccn-link-stat", 7).current_time == "Wed Aug  2 03:09:29 2022"


def test_collection_error_keeps_collection_line_numbers(sample):
    text = sample("hccn_tool-ip-g-loop_8npu_mindcluster-faultdiag-worker9.txt").replace(
        "ipaddr:192.3.26.213", "ipaddr:192.3.26.2x3")
    with pytest.raises(ParseError) as err:
        parse_hccn_collection(text)
    assert err.value.line_no == 26 and err.value.line == "ipaddr:192.3.26.2x3"
    original = sample("hccn_tool-ip-g-loop_8npu_mindcluster-faultdiag-worker9.txt")
    with pytest.raises(ParseError, match="device 6 appears twice"):
        parse_per_device("hccn-ip", original.replace("-i 7 -ip", "-i 6 -ip"))


def test_stat_counters_and_bad_counter():
    stat = parse_hccn_stat("packet statistics:\nroce_rx_err_pkt_num:0\nroce_tx_err_pkt_num:12\n")
    assert stat.counters == {"roce_rx_err_pkt_num": 0, "roce_tx_err_pkt_num": 12}
    with pytest.raises(ParseError) as err:
        parse_hccn_stat("packet statistics:\nroce_rx_err_pkt_num:many\n")
    assert err.value.line_no == 2


def test_link_stat_devid_sample(sample):
    stat = parse_hccn_link_stat(sample("hccn_tool-link_stat-g_910a_mindcluster-faultdiag.txt"))
    assert (stat.device_id, stat.link_up_count, stat.link_down_count) == (0, 2, None)
    assert [(r.time, r.status) for r in stat.records] == [
        ("Tue Aug  1 14:43:40 2022", "UP"), ("Tue Aug  1 14:43:40 2022", "DOWN"),
        ("Tue Aug  1 14:43:26 2022", "UP")]


def test_link_stat_newer_device_prefix():
    text = ("[device 2]current time        : Wed Aug  2 03:09:26 2022\n[device 2]link up count       : 1\n"
            "[device 2]link down count     : 0\n[device 2]link change records :\n"
            "[device 2]    Tue Aug  1 14:43:26 2022    LINK UP\n")
    stat = parse_hccn_link_stat(text)
    assert (stat.device_id, stat.link_down_count, len(stat.records)) == (2, 0, 1)


def test_link_stat_without_records_prints_na():
    # hccn_tool's tool_display_link_his_stat(): `link change records : NA` when it holds no record
    text = ("[devid 1]current time        : Wed Aug  2 03:09:26 2022\n[devid 1]link up count       : 0\n"
            "[devid 1]link down count     : 0\n[devid 1]link change records : NA\n")
    stat = parse_hccn_link_stat(text)
    assert (stat.device_id, stat.link_up_count, stat.link_down_count, stat.records) == (1, 0, 0, [])
    with pytest.raises(ParseError) as err:  # no record may follow an NA
        parse_hccn_link_stat(text + "[devid 1]    Tue Aug  1 14:43:26 2022    LINK UP\n")
    assert err.value.line_no == 5


def test_echo_behind_a_bracketed_prompt_or_venv():
    link = parse_hccn_link("[root@node01 ~]# hccn_tool -i 6 -link -g\nlink status: UP\n")
    assert (link.device_id, link.status) == (6, "UP")
    ip = parse_hccn_ip("(venv) user@node01:~$ /usr/local/Ascend/driver/tools/hccn_tool -i 2 -ip -g\n"
                       "ipaddr:192.168.1.12\nnetmask:255.255.255.0\n")
    assert (ip.device_id, ip.address) == (2, "192.168.1.12")


def test_ping_sample(sample):
    ping = parse_hccn_ping(sample("hccn_tool-ping-g_910b1_arthurchiao-blog.txt"))
    assert (ping.device_id, ping.target) == (3, "29.1.137.205")
    assert [r.time_ms for r in ping.replies] == [1.418, 0.034, 0.04]
    assert (ping.transmitted, ping.received, ping.loss_pct) == (3, 3, 0.0)


def test_ping_cut_off_is_an_error(sample):
    text = sample("hccn_tool-ping-g_910b1_arthurchiao-blog.txt").rsplit("3 packets", 1)[0]
    with pytest.raises(ParseError, match="summary"):
        parse_hccn_ping(text)


def test_fec_tls_optical_lldp():
    assert parse_hccn_fec("fec mode: no FEC mode\n").enabled is False
    assert parse_hccn_fec("fec mode: rs FEC mode\n").enabled is True
    tls = parse_hccn_tls("dev_id:0, tls switch[0](0:disable, 1:enable), tls preconfigured[1](0:non-preset, "
                         "1:preset), tls alarm time threshold[60]days\n")
    assert (tls.device_id, tls.tls_enabled) == (0, False)
    assert (tls.preconfigured, tls.alarm_threshold_days) == (True, 60)
    optical = parse_hccn_optical(OPTICAL)
    assert optical.present and optical.vendor_name == "Hisense"
    assert optical.rx_power_mw == [1.0189, 0.0054] and optical.tx_bias_ma == [7.936]
    assert (optical.temperature_c, optical.vcc_mv, optical.rx_power_low_mw) == (47.0, 3262.9, 0.1445)
    assert optical.media_snr_db == [23.1211]
    lldp = parse_hccn_lldp("Chassis ID TLV\n\tMAC: 34:1c:f0:aa:bb:cc\nPort ID TLV\n\tIfname: 200GE1/0/7\n"
                           "Time to Live TLV\n\t121\nSystem Name TLV\n\tleaf-03\nEnd of LLDPDU TLV\n")
    assert (lldp.chassis_id, lldp.port_id, lldp.system_name) == ("34:1c:f0:aa:bb:cc", "200GE1/0/7", "leaf-03")


def test_optical_bad_unit_names_line():
    with pytest.raises(ParseError) as err:
        parse_hccn_optical(OPTICAL.replace("1.0189 mW", "1.0189 dBx"))
    assert err.value.line_no == 8


def test_hccn_conf_sample(sample):
    conf = parse_hccn_conf(sample("hccn.conf_8npu-gateway-netdetect_arthurchiao-blog.txt"))
    assert conf.elided is True
    assert sorted(conf.devices) == [0, 7]
    assert conf.devices[0].address == "29.1.137.205" and conf.devices[7].address == "29.1.170.143"
    assert conf.devices[0].netmask == "255.255.0.0" and conf.devices[0].gateway == "29.1.0.1"
    assert conf.devices[0].netdetect == "29.1.0.1" and conf.devices[7].send_arp_status == 1


def test_hccn_conf_extra_keys_and_errors():
    conf = parse_hccn_conf("# NIC plane\naddress_0=10.0.0.2\ndscp_tc_0=33:4\nbond=off\n")
    assert conf.devices[0].extra == {"dscp_tc": "33:4"} and conf.globals == {"bond": "off"}
    with pytest.raises(ParseError) as err:
        parse_hccn_conf("address_0=10.0.0.2\nthis is not a setting\n")
    assert err.value.line_no == 2
    with pytest.raises(ParseError, match="set twice"):
        parse_hccn_conf("address_0=10.0.0.2\naddress_0=10.0.0.3\n")


def test_gateway_and_netdetect():
    # format of the vllm-ascend multi-node guide's `for i in {0..7}; do hccn_tool -i $i -gateway -g; done`
    gateway = parse_hccn_gateway("default gateway:11.12.165.1, Iface:eth0\n")
    assert (gateway.gateway, gateway.interface) == ("11.12.165.1", "eth0")
    assert parse_hccn_gateway("default gateway:, Iface:eth3\n").gateway is None
    assert parse_hccn_netdetect("netdetect address: 11.12.165.1\n").address == "11.12.165.1"
    # the open-source hccn_tool's tool_get_netdetect() prints `netdetect addr: %s`
    assert parse_hccn_netdetect("netdetect addr: 11.12.165.1\n").address == "11.12.165.1"
    with pytest.raises(ParseError) as err:
        parse_hccn_netdetect("netdetect address: 11.12.165\n")
    assert err.value.line_no == 1


def test_tool_error_lines_carry_a_hint():
    with pytest.raises(ParseError) as err:
        parse_hccn_link("Invalid device id: 0\n"
                        "Usage: hccn_tool -i <device_id> -<command> -g|-s [param value ...]\n")
    assert err.value.line_no == 1 and "npu-smi info -m" in err.value.hint


def test_lldp_empty_output_explains_itself():
    with pytest.raises(ParseError) as err:
        parse_hccn_lldp("")
    assert "LLDPDU" in err.value.hint
