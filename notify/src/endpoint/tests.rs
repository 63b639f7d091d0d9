use super::*;
use EndpointProblem::*;
use Environment::{Deployed, Local};

/// Each URL, and what each environment answers: `None` accepted, `Some(problem)` refused.
const TABLE: &[(&str, Option<EndpointProblem>, Option<EndpointProblem>)] = &[
    // (url, deployed, local)
    ("https://chat.example.com/hooks/handoff", None, None),
    ("https://fcm.googleapis.com/fcm/send/abc:def", None, None),
    ("https://updates.push.services.mozilla.com/wpush/v2/gAAAA", None, None),
    ("https://web.push.apple.com/QGuQyavXutnMH", None, None),
    ("https://chat.example.com:8443/in?x=1", None, None),
    ("HTTPS://Chat.Example.COM/in", None, None),
    ("https://chat.example.com./in", None, None),
    ("http://chat.example.com/hooks", Some(Scheme), Some(Scheme)),
    ("http://127.0.0.1:9000/hooks", Some(Scheme), None),
    ("http://127.0.0.1/hooks", Some(Scheme), None),
    ("http://127.1:9000/hooks", Some(Scheme), None),
    ("http://127.0.0.2:9000/hooks", Some(Scheme), Some(Scheme)),
    ("http://localhost:9000/hooks", Some(Scheme), Some(Scheme)),
    ("http://[::1]:9000/hooks", Some(Scheme), Some(Scheme)),
    ("ftp://chat.example.com/hooks", Some(Scheme), Some(Scheme)),
    ("wss://chat.example.com/hooks", Some(Scheme), Some(Scheme)),
    ("https://127.0.0.1/hooks", Some(IpLiteral), Some(IpLiteral)),
    ("https://10.0.0.8/hooks", Some(IpLiteral), Some(IpLiteral)),
    ("https://0x7f000001/hooks", Some(IpLiteral), Some(IpLiteral)),
    ("https://2130706433/hooks", Some(IpLiteral), Some(IpLiteral)),
    ("https://[::1]/hooks", Some(IpLiteral), Some(IpLiteral)),
    ("https://[2001:db8::1]/hooks", Some(IpLiteral), Some(IpLiteral)),
    ("https://localhost/hooks", Some(Localhost), Some(Localhost)),
    ("https://LOCALHOST./hooks", Some(Localhost), Some(Localhost)),
    ("https://api.localhost/hooks", Some(Localhost), Some(Localhost)),
    ("https://intranet/hooks", Some(SingleLabel), Some(SingleLabel)),
    ("https://user:pw@chat.example.com/hooks", Some(Credentials), Some(Credentials)),
    ("https://user@chat.example.com/hooks", Some(Credentials), Some(Credentials)),
    ("http://user@127.0.0.1:9000/hooks", Some(Credentials), Some(Credentials)),
    ("https://chat.example.com/hooks#top", Some(Fragment), Some(Fragment)),
    ("chat.example.com/hooks", Some(NotUrl), Some(NotUrl)),
    ("/hooks", Some(NotUrl), Some(NotUrl)),
    ("", Some(NotUrl), Some(NotUrl)),
    ("https://", Some(NotUrl), Some(NotUrl)),
    ("https://exa mple.com/", Some(NotUrl), Some(NotUrl)),
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
fn the_origin_is_scheme_host_and_a_port_only_when_not_the_default() {
    let origin = |url: &str| Endpoint::parse("url", url, Local).unwrap().origin();
    assert_eq!(origin("https://fcm.googleapis.com/fcm/send/abc"), "https://fcm.googleapis.com");
    assert_eq!(origin("HTTPS://Push.Example.com:443/x"), "https://push.example.com");
    assert_eq!(origin("https://push.example.com:8443/x"), "https://push.example.com:8443");
    assert_eq!(origin("http://127.0.0.1:9000/push/1"), "http://127.0.0.1:9000");
}

#[test]
fn the_url_sent_to_is_the_parsers_normal_form() {
    let endpoint = Endpoint::parse("url", "HTTPS://Chat.Example.COM:443/a/../in", Deployed).unwrap();
    assert_eq!(endpoint.as_str(), "https://chat.example.com/in");
}
