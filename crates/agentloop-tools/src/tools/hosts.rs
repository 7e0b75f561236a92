//! Which hosts and addresses the network tools may reach: private-address classification,
//! IP spellings read as a resolver reads them, and `tools.http.deny_hosts` judged by name and
//! by address (a denied name is resolved when the list is made). [`super::net`] applies them to
//! each URL, each redirect hop and each address connected to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, ToSocketAddrs};

fn is_private_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || o[0] == 0
        || (o[0] == 100 && (64..128).contains(&o[1]))
        || (o[0] == 198 && (o[1] == 18 || o[1] == 19))
        || o[0] >= 240
}

pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_private_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private_v4(v4);
            }
            let s = v6.segments();
            // IPv4-compatible (::a.b.c.d, deprecated but routed by some stacks) and 6to4
            // (2002:AABB:CCDD::/48 embeds a.b.c.d) carry an IPv4 address: judge that one.
            if s[..6].iter().all(|x| *x == 0) && (s[6] != 0 || s[7] > 1) {
                let [a, b] = s[6].to_be_bytes();
                let [c, d] = s[7].to_be_bytes();
                return is_private_v4(Ipv4Addr::new(a, b, c, d));
            }
            if s[0] == 0x2002 {
                let [a, b] = s[1].to_be_bytes();
                let [c, d] = s[2].to_be_bytes();
                if is_private_v4(Ipv4Addr::new(a, b, c, d)) {
                    return true;
                }
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] & 0xffc0) == 0xfec0
                || (s[0] == 0x64 && s[1] == 0xff9b)
                || (s[0] == 0x2001 && s[1] == 0xdb8)
                || v6 == Ipv6Addr::from([0, 0, 0, 0, 0, 0, 0, 1])
        }
    }
}

pub(super) fn host_matches(host: &str, pattern: &str) -> bool {
    let pattern = normal_host(pattern);
    match pattern.strip_prefix("*.") {
        Some(suffix) => host.ends_with(&format!(".{suffix}")) || host == suffix,
        None => host == pattern,
    }
}

/// An IP address in any spelling a resolver accepts: the usual forms, and the ones
/// `inet_aton` and URL parsers also take (`127.1`, `2130706433`, `0x7f.1`, `0177.0.0.1`),
/// with or without brackets. An IPv4-mapped IPv6 address is given as its IPv4 address.
pub(super) fn parse_ip(s: &str) -> Option<IpAddr> {
    let s = s.trim().trim_start_matches('[').trim_end_matches(']');
    if s.is_empty() {
        return None;
    }
    let ip = match s.parse::<IpAddr>() {
        Ok(ip) => ip,
        Err(_) if s.contains(':') => return None,
        Err(_) => match url::Host::parse(s) {
            Ok(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
            _ => return None,
        },
    };
    Some(ip.to_canonical())
}

/// A host as compared: lower case, without brackets or a final dot (`Example.COM.` is
/// `example.com`).
pub(super) fn normal_host(h: &str) -> String {
    h.trim().trim_start_matches('[').trim_end_matches(']').trim_end_matches('.').to_ascii_lowercase()
}

/// One `tools.http.deny_hosts` entry, as written and as read.
#[derive(Debug, Clone)]
struct Denied {
    entry: String,
    what: DenyKind,
}

#[derive(Debug, Clone)]
enum DenyKind {
    /// A name (`internal.example`), or a name and every name under it (`*.example`).
    Name { name: String, below: bool },
    /// Addresses: one (`prefix` its full length) or a block (`10.0.0.0/8`, `fd00::/8`); `via`
    /// when the entry is a name and this is an address it resolves to.
    Net { addr: IpAddr, prefix: u8, via: bool },
}

/// `tools.http.deny_hosts`, read for one request: names match the host as written; addresses
/// (literals in any spelling, blocks, and what the entries that are names resolve to now, with
/// the same resolver the request uses) match every address the host stands for, so no other
/// spelling and no other name of a denied address gets through.
#[derive(Debug, Clone, Default)]
pub struct DenyList {
    entries: Vec<Denied>,
}

impl DenyList {
    pub fn new(entries: &[String]) -> DenyList {
        let mut out = Vec::new();
        for raw in entries {
            let entry = raw.trim().to_string();
            let e = normal_host(&entry);
            if e.is_empty() {
                continue;
            }
            if let Some((a, bits)) = e.split_once('/') {
                let addr = parse_ip(a);
                let max = if matches!(addr, Some(IpAddr::V4(_))) { 32 } else { 128 };
                // A mapped block (`::ffff:10.0.0.0/104`) is the IPv4 block it maps.
                let shift = if a.contains(':') && matches!(addr, Some(IpAddr::V4(_))) { 96 } else { 0 };
                match (addr, bits.trim().parse::<u8>()) {
                    (Some(addr), Ok(b)) if b >= shift && b - shift <= max => {
                        out.push(Denied { entry, what: DenyKind::Net { addr, prefix: b - shift, via: false } });
                    }
                    // Not a block that parses: kept as a name, which no host can match.
                    _ => out.push(Denied { entry, what: DenyKind::Name { name: e, below: false } }),
                }
                continue;
            }
            if let Some(addr) = parse_ip(&e) {
                let prefix = if addr.is_ipv4() { 32 } else { 128 };
                out.push(Denied { entry, what: DenyKind::Net { addr, prefix, via: false } });
                continue;
            }
            if let Some(suffix) = e.strip_prefix("*.") {
                out.push(Denied { entry, what: DenyKind::Name { name: suffix.to_string(), below: true } });
                continue;
            }
            // A denied name also denies the addresses it stands for now; one that does not
            // resolve is still denied by name.
            if let Ok(addrs) = (e.as_str(), 80).to_socket_addrs() {
                for a in addrs {
                    let addr = a.ip().to_canonical();
                    let prefix = if addr.is_ipv4() { 32 } else { 128 };
                    out.push(Denied { entry: entry.clone(), what: DenyKind::Net { addr, prefix, via: true } });
                }
            }
            out.push(Denied { entry, what: DenyKind::Name { name: e, below: false } });
        }
        DenyList { entries: out }
    }

    /// Whether any entry names addresses (then the host must be resolved to be judged).
    pub(super) fn has_addresses(&self) -> bool {
        self.entries.iter().any(|d| matches!(d.what, DenyKind::Net { .. }))
    }

    /// The entry that denies the name `host` (normalised), if one does.
    pub(super) fn name(&self, host: &str) -> Option<&str> {
        self.entries.iter().find_map(|d| match &d.what {
            DenyKind::Name { name, below } => {
                let hit = host == name || (*below && host.ends_with(&format!(".{name}")));
                hit.then_some(d.entry.as_str())
            }
            DenyKind::Net { .. } => None,
        })
    }

    /// Why the address `ip` is denied, if it is: `it is 127.0.0.1, which `localhost` resolves to`.
    /// The unspecified address (`0.0.0.0`, `::`) connects to this machine, so it is also judged
    /// as the loopback addresses: `deny_hosts: [127.0.0.1]` denies `http://0:8080/` too.
    pub fn address(&self, ip: IpAddr) -> Option<String> {
        let ip = ip.to_canonical();
        if ip.is_unspecified() {
            let loopback = [IpAddr::V4(Ipv4Addr::LOCALHOST), IpAddr::V6(Ipv6Addr::LOCALHOST)];
            return [ip].into_iter().chain(loopback).find_map(|a| self.one(a)).map(|why| {
                format!("{why} (the unspecified address {ip} connects to this machine, as the loopback address)")
            });
        }
        self.one(ip)
    }

    fn one(&self, ip: IpAddr) -> Option<String> {
        self.entries.iter().find_map(|d| match d.what {
            DenyKind::Net { addr, prefix, via } if in_block(ip, addr, prefix) => {
                let e = &d.entry;
                Some(match (via, u32::from(prefix) < full_length(addr)) {
                    (true, _) => format!("it is {ip}, which the entry `{e}` resolves to"),
                    (false, true) => format!("it is {ip}, inside the entry `{e}`"),
                    (false, false) => format!("it is {ip}, which the entry `{e}` names"),
                })
            }
            _ => None,
        })
    }
}

fn full_length(ip: IpAddr) -> u32 {
    if ip.is_ipv4() {
        32
    } else {
        128
    }
}

/// Whether `ip` lies in the block `net`/`prefix` (both canonical; families must agree).
fn in_block(ip: IpAddr, net: IpAddr, prefix: u8) -> bool {
    let (a, b, len) = match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u128::from(u32::from(a)), u128::from(u32::from(b)), 32u32),
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128u32),
        _ => return false,
    };
    let prefix = u32::from(prefix).min(len);
    if prefix == 0 {
        return true;
    }
    let shift = len - prefix;
    (a >> shift) == (b >> shift)
}

#[cfg(test)]
mod private_tests {
    use super::is_private;

    #[test]
    fn embedded_and_site_local_ipv6_forms_are_private() {
        for a in [
            "::127.0.0.1",
            "::ffff:10.0.0.1",
            "2002:7f00:1::",
            "2002:c0a8:101::1",
            "fec0::1",
            "fe80::1",
            "::1",
            "fc00::1",
        ] {
            assert!(is_private(a.parse().unwrap()), "{a}");
        }
        for a in ["2606:4700::1111", "2002:0808:0808::1", "8.8.8.8"] {
            assert!(!is_private(a.parse().unwrap()), "{a}");
        }
    }
}

#[cfg(test)]
mod deny_tests {
    use super::*;

    #[test]
    fn ip_spellings_are_read_as_the_resolver_reads_them() {
        let home: IpAddr = "127.0.0.1".parse().unwrap();
        for s in [
            "127.0.0.1",
            "127.1",
            "2130706433",
            "0x7f.1",
            "0177.0.0.1",
            "0x7f000001",
            "[::ffff:127.0.0.1]",
            "::ffff:7f00:1",
        ] {
            assert_eq!(parse_ip(s), Some(home), "{s}");
        }
        assert_eq!(parse_ip("[::1]"), Some("::1".parse().unwrap()));
        for s in ["localhost", "example.com", "1.2.3.4.5", "foo.123", ""] {
            assert_eq!(parse_ip(s), None, "{s}");
        }
    }

    #[test]
    fn entries_deny_names_blocks_and_addresses() {
        let d = DenyList::new(&[
            "10.0.0.0/8".into(),
            "*.Internal.".into(),
            "0x7f.1".into(),
            "fd00::/8".into(),
            "bogus/99".into(),
        ]);
        let why = |ip: &str| d.address(ip.parse().unwrap());
        assert!(why("10.2.3.4").unwrap().contains("inside the entry `10.0.0.0/8`"));
        assert!(why("::ffff:10.2.3.4").is_some(), "a mapped address is its IPv4 address");
        assert!(why("127.0.0.1").unwrap().contains("names"));
        assert!(why("fd12::1").is_some());
        assert_eq!((why("11.0.0.1"), why("fe80::1")), (None, None));
        assert_eq!(d.name("a.b.internal"), Some("*.Internal."));
        assert_eq!(d.name("internal"), Some("*.Internal."));
        assert_eq!(d.name("internalx"), None);
        assert!(!in_block("1.2.3.4".parse().unwrap(), "::".parse().unwrap(), 0), "families differ");
        assert!(in_block("1.2.3.4".parse().unwrap(), "0.0.0.0".parse().unwrap(), 0));
    }

    #[test]
    fn the_unspecified_address_is_judged_as_this_machine() {
        let d = DenyList::new(&["127.0.0.1".into(), "::1".into()]);
        for ip in ["0.0.0.0", "::", "::ffff:0.0.0.0"] {
            let why = d.address(ip.parse().unwrap()).unwrap_or_default();
            assert!(why.contains("connects to this machine"), "{ip}: {why}");
        }
        assert_eq!(DenyList::new(&["10.0.0.0/8".into()]).address("0.0.0.0".parse().unwrap()), None);
    }
}
