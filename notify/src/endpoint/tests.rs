use super::*;
use proptest::prelude::*;
use EndpointProblem::*;
use Environment::{Deployed, Local};

/// Each URL, and what each environment answers: `None` accepted, `Some(problem)` refused.
const TABLE: &[(&str, Option<EndpointProblem>, Option<EndpointProblem>)] = &[
    // (url, deployed, local)
    ("https://chat.example.com/hooks/handoff", None, None),
    ("https://fcm.googleapis.com/fcm/send/abc:def-ghi_jkl", None, None),
    ("https://updates.push.services.mozilla.com/wpush/v2/gAAAA", None, None),
    ("https://web.push.apple.com/QGuQyavXutnMH", None, None),
    ("https://chat.example.com:8443/in?x=1&y=%20", None, None),
    ("https://chat.example.com?x=1", None, None),
    ("https://chat.example.com", None, None),
    ("HTTPS://Chat.Example.COM/in", None, None),
    ("https://chat.example.com./in", None, None),
    ("https://a.0x7f.example/in", None, None),
    ("https://xn--bcher-kva.example/in", None, None),
    ("https://9to5.example/in", None, None),
    ("http://chat.example.com/hooks", Some(Scheme), Some(Scheme)),
    ("http://127.0.0.1:9000/hooks", Some(Scheme), None),
    ("http://127.0.0.1/hooks", Some(Scheme), None),
    ("http://127.0.0.1:9000", Some(Scheme), None),
    ("http://127.1:9000/hooks", Some(Scheme), Some(Scheme)),
    ("http://127.0.0.2:9000/hooks", Some(Scheme), Some(Scheme)),
    ("http://localhost:9000/hooks", Some(Scheme), Some(Scheme)),
    ("http://[::1]:9000/hooks", Some(IpLiteral), Some(IpLiteral)),
    ("ftp://chat.example.com/hooks", Some(Scheme), Some(Scheme)),
    ("wss://chat.example.com/hooks", Some(Scheme), Some(Scheme)),
    ("https://127.0.0.1/hooks", Some(IpLiteral), Some(IpLiteral)),
    ("https://10.0.0.8/hooks", Some(IpLiteral), Some(IpLiteral)),
    ("https://1.2.3.4./hooks", Some(IpLiteral), Some(IpLiteral)),
    ("https://0x7f000001/hooks", Some(IpLiteral), Some(IpLiteral)),
    ("https://0x7f.1/hooks", Some(IpLiteral), Some(IpLiteral)),
    ("https://2130706433/hooks", Some(IpLiteral), Some(IpLiteral)),
    ("https://example.123/hooks", Some(IpLiteral), Some(IpLiteral)),
    ("https://[::1]/hooks", Some(IpLiteral), Some(IpLiteral)),
    ("https://[2001:db8::1]/hooks", Some(IpLiteral), Some(IpLiteral)),
    ("https://localhost/hooks", Some(Localhost), Some(Localhost)),
    ("https://LOCALHOST./hooks", Some(Localhost), Some(Localhost)),
    ("https://api.localhost/hooks", Some(Localhost), Some(Localhost)),
    ("https://intranet/hooks", Some(SingleLabel), Some(SingleLabel)),
    ("https://exa_mple.com/", Some(HostName), Some(HostName)),
    ("https://-chat.example.com/", Some(HostName), Some(HostName)),
    ("https://chat..example.com/", Some(HostName), Some(HostName)),
    ("https://chat%2eexample.com/", Some(HostName), Some(HostName)),
    ("https://chat.example.1com/", Some(HostName), Some(HostName)),
    ("https://user:pw@chat.example.com/hooks", Some(Credentials), Some(Credentials)),
    ("https://user@chat.example.com/hooks", Some(Credentials), Some(Credentials)),
    ("http://user@127.0.0.1:9000/hooks", Some(Credentials), Some(Credentials)),
    ("https://chat.example.com/hooks#top", Some(Fragment), Some(Fragment)),
    ("https://chat.example.com:0/", Some(NotUrl), Some(NotUrl)),
    ("https://chat.example.com:65536/", Some(NotUrl), Some(NotUrl)),
    ("https://chat.example.com:/", Some(NotUrl), Some(NotUrl)),
    ("https://chat.example.com:+443/", Some(NotUrl), Some(NotUrl)),
    ("https://chat.example.com\\@evil.example/", Some(NotUrl), Some(NotUrl)),
    ("https://chat.example.com/a b", Some(NotUrl), Some(NotUrl)),
    ("https://chat.exa\tmple.com/", Some(NotUrl), Some(NotUrl)),
    ("https://bücher.example/", Some(NotUrl), Some(NotUrl)),
    ("https:chat.example.com/hooks", Some(NotUrl), Some(NotUrl)),
    ("https:///chat.example.com/hooks", Some(NotUrl), Some(NotUrl)),
    ("chat.example.com/hooks", Some(NotUrl), Some(NotUrl)),
    ("/hooks", Some(NotUrl), Some(NotUrl)),
    ("", Some(NotUrl), Some(NotUrl)),
    ("https://", Some(NotUrl), Some(NotUrl)),
];

#[test]
fn each_url_is_accepted_or_refused_as_its_environment_says() {
    for &(url, deployed, local) in TABLE {
        for (env, expected) in [(Deployed, deployed), (Local, local)] {
            let got = Endpoint::parse("url", url, env).err().map(|refusal| refusal.problem);
            assert_eq!(got, expected, "{url} in {env:?}");
        }
    }
}

#[test]
fn a_refusal_names_the_field_that_carried_the_url() {
    let refusal = Endpoint::parse("endpoint", "http://chat.example.com/", Deployed).unwrap_err();
    assert_eq!(refusal, EndpointRefusal { field: "endpoint", problem: Scheme });
    assert_eq!(refusal.to_string(), "endpoint must be an https URL");
    let refusal = Endpoint::parse("url", "https://10.0.0.8/", Deployed).unwrap_err();
    assert_eq!(refusal.to_string(), "url must name a host, not an IP address");
}

#[test]
fn a_url_over_the_limit_is_refused_before_it_is_parsed() {
    let base = "https://chat.example.com/";
    let at_limit = format!("{base}{}", "a".repeat(ENDPOINT_BYTES_MAX - base.len()));
    assert!(Endpoint::parse("url", &at_limit, Deployed).is_ok());
    let over = format!("{at_limit}a");
    assert_eq!(Endpoint::parse("url", &over, Deployed).unwrap_err().problem, TooLong);
}

#[test]
fn a_host_name_is_at_most_253_bytes_of_labels_of_at_most_63() {
    let label = "a".repeat(63);
    let name = |labels: usize| vec![label.as_str(); labels].join(".");
    let host = format!("{}.{}.example", name(3), "b".repeat(253 - 3 * 64 - 8));
    assert_eq!(host.len(), 253);
    assert!(Endpoint::parse("url", &format!("https://{host}/"), Deployed).is_ok());
    assert_eq!(Endpoint::parse("url", &format!("https://a{host}/"), Deployed).unwrap_err().problem, HostName);
    let long_label = format!("https://{}a.example/", label);
    assert_eq!(Endpoint::parse("url", &long_label, Deployed).unwrap_err().problem, HostName);
}

#[test]
fn the_origin_is_scheme_host_and_a_port_only_when_not_the_default() {
    let origin = |url: &str| Endpoint::parse("url", url, Local).unwrap().origin().to_string();
    assert_eq!(origin("https://fcm.googleapis.com/fcm/send/abc"), "https://fcm.googleapis.com");
    assert_eq!(origin("HTTPS://Push.Example.com:443/x"), "https://push.example.com");
    assert_eq!(origin("https://push.example.com:8443/x"), "https://push.example.com:8443");
    assert_eq!(origin("http://127.0.0.1:9000/push/1"), "http://127.0.0.1:9000");
    assert_eq!(origin("http://127.0.0.1:80/push/1"), "http://127.0.0.1");
}

#[test]
fn the_url_sent_to_is_the_origin_then_the_path_and_query_as_given() {
    let url = |text: &str| Endpoint::parse("url", text, Deployed).unwrap().url();
    assert_eq!(url("HTTPS://Chat.Example.COM:443/a/../In?X=1"), "https://chat.example.com/a/../In?X=1");
    assert_eq!(url("https://chat.example.com"), "https://chat.example.com/");
    assert_eq!(url("https://chat.example.com?x"), "https://chat.example.com/?x");
}

/// What the WHATWG parser (the runtime's `fetch`) makes of a URL this rule accepted: it
/// parses, its origin is the rule's, and its host is a name (or, in `local`, 127.0.0.1).
fn whatwg_agrees(text: &str, endpoint: &Endpoint, env: Environment) -> Result<(), String> {
    let parsed = url::Url::parse(text).map_err(|e| format!("{text}: WHATWG refuses it: {e}"))?;
    let host_ok = match parsed.host() {
        Some(url::Host::Domain(_)) => true,
        Some(url::Host::Ipv4(ip)) => env == Local && ip == std::net::Ipv4Addr::LOCALHOST && parsed.scheme() == "http",
        _ => false,
    };
    if !host_ok {
        return Err(format!("{text}: WHATWG reads host {:?}", parsed.host()));
    }
    if parsed.origin().ascii_serialization() != endpoint.origin() {
        return Err(format!(
            "{text}: WHATWG origin {} but ours {}",
            parsed.origin().ascii_serialization(),
            endpoint.origin()
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() || parsed.fragment().is_some() {
        return Err(format!("{text}: WHATWG finds credentials or a fragment"));
    }
    let again =
        url::Url::parse(&endpoint.url()).map_err(|e| format!("{}: WHATWG refuses ours: {e}", endpoint.url()))?;
    if again.origin() != parsed.origin() || again.path() != parsed.path() || again.query() != parsed.query() {
        return Err(format!("{text}: WHATWG reads ours ({}) as another URL", endpoint.url()));
    }
    Ok(())
}

#[test]
fn every_accepted_url_in_the_table_means_the_same_to_the_whatwg_parser() {
    for &(text, deployed, local) in TABLE {
        for (env, expected) in [(Deployed, deployed), (Local, local)] {
            if expected.is_none() {
                let endpoint = Endpoint::parse("url", text, env).unwrap();
                whatwg_agrees(text, &endpoint, env).unwrap();
            }
        }
    }
}

/// URL-ish text: a scheme, labels joined by dots (mostly plausible, some odd), a port, a
/// path-like tail, so that many cases come near the rule's edges rather than failing early.
fn urlish() -> impl Strategy<Value = String> {
    let scheme = prop::sample::select(vec!["https", "https", "HTTPS", "http", "ftp", "https:"]);
    let label = prop_oneof![
        8 => prop::sample::select(vec!["chat", "example", "com", "a1", "x-y", "xn--bcher-kva", "Push", "9to5", "io"]),
        2 => prop::sample::select(vec!["0x7f", "123", "0", "localhost", "127", "1"]),
        1 => prop::sample::select(vec!["", "-a", "a-", "_", "%2e", "ü", " ", "@", "[::1]", "a\\b", "a:b"]),
    ];
    let host = prop::collection::vec(label, 1..5).prop_map(|labels| labels.join("."));
    let dot = prop::sample::select(vec!["", "", "", "."]);
    let port = prop::sample::select(vec!["", "", "", ":443", ":8443", ":0", ":", ":65536", ":80"]);
    let user = prop::sample::select(vec!["", "", "", "", "", "", "u@", "u:p@"]);
    let tail = prop::sample::select(vec![
        "", "/", "/in", "?q=1", "/a/../b", "#f", "/%41", "/a?b=c&d", "/'x'", "//x", "/a:b@c",
    ]);
    (scheme, user, host, dot, port, tail)
        .prop_map(|(scheme, user, host, dot, port, tail)| format!("{scheme}://{user}{host}{dot}{port}{tail}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn every_accepted_url_means_the_same_host_to_the_whatwg_parser(text in urlish(), local in any::<bool>()) {
        let env = if local { Local } else { Deployed };
        if let Ok(endpoint) = Endpoint::parse("url", &text, env) {
            prop_assert_eq!(whatwg_agrees(&text, &endpoint, env), Ok(()));
        }
    }

    #[test]
    fn any_text_is_answered_without_panicking(text in "\\PC{0,80}", local in any::<bool>()) {
        let env = if local { Local } else { Deployed };
        if let Ok(endpoint) = Endpoint::parse("url", &text, env) {
            prop_assert_eq!(whatwg_agrees(&text, &endpoint, env), Ok(()));
        }
    }
}
