use super::*;

/// The canonical text both this parser and graphite-web's grammar (run through a small
/// Python harness) are compared in: pipes as calls, numbers by their Python value.
fn canon(expr: &Expr) -> String {
    match expr {
        Expr::Path(p) => format!("P({p})"),
        Expr::Call(c) => format!("{}({})", c.name, canon_args(&c.args, &c.kwargs)),
        Expr::Int(i) => format!("I({i})"),
        Expr::Float(f) => format!("F({})", crate::pyfmt::repr_f64(*f)),
        Expr::Str(s) => format!("S({s})"),
        Expr::Bool(b) => format!("B({})", if *b { "True" } else { "False" }),
        Expr::None => "N".to_owned(),
        Expr::Inf => "INF".to_owned(),
        Expr::Template(t) => format!("T({};{})", canon(&t.expr), canon_args(&t.args, &t.kwargs)),
    }
}

/// A call's or a template's arguments in the canonical text: `a,b;k=v`.
fn canon_args(args: &[Expr], kwargs: &[(String, Expr)]) -> String {
    let args: Vec<String> = args.iter().map(canon).collect();
    let kwargs: Vec<String> = kwargs
        .iter()
        .map(|(k, v)| format!("{k}={}", canon(v)))
        .collect();
    format!("{};{}", args.join(","), kwargs.join(","))
}

fn parsed(target: &str) -> Option<String> {
    Expr::parse(target).ok().map(|e| canon(&e))
}

/// Targets and what graphite-web 1.1.10's grammar (pyparsing 3.3, `parseAll=True`) makes of
/// them; `None` where it cannot consume the whole target.
const CASES: &[(&str, Option<&str>)] = &[
    ("a.b.c", Some("P(a.b.c)")),
    ("sumSeries(a.*)", Some("sumSeries(P(a.*);)")),
    ("f(a=1)", None),
    ("f(x, a=1)", Some("f(P(x);a=I(1))")),
    ("f( a.b , c )", Some("f(P(a.b),P(c);)")),
    (" f(a)", Some("f(P(a);)")),
    ("sumSeries(foo", None),
    (")x", None),
    ("f(true.foo)", None),
    ("f(1e5)", Some("f(F(100000.0);)")),
    ("f(1E-5)", Some("f(F(1e-05);)")),
    ("f(1e+5)", Some("f(P(1e+5);)")),
    ("f(-1.5)", Some("f(F(-1.5);)")),
    ("f(5foo)", Some("f(P(5foo);)")),
    ("f(\"a\"\"b\")", Some("f(S(a\"\"b);)")),
    ("f('x')", Some("f(S(x);)")),
    ("f(True, NONE, Inf)", Some("f(B(True),N,INF;)")),
    ("a | f() | g(1)", Some("g(f(P(a);),I(1);)")),
    ("template(a.$x, x=\"b\")", Some("T(P(a.$x);;x=S(b))")),
    ("a.{b,c}d.e", Some("P(a.{b,c}d.e)")),
    ("a\\(b", Some("P(a(b)")),
    ("f (a)", Some("f(P(a);)")),
    ("f(a) ", Some("f(P(a);)")),
    ("f(a)x", None),
    ("a.b c", None),
    ("f(,)", None),
    ("f()", Some("f(;)")),
    ("f(a,)", None),
    ("f(a,b=1,c)", None),
    ("f(1 )", Some("f(I(1);)")),
    ("f(\"\\x41\")", Some("f(S(\\x41);)")),
    ("f(\"\\x\")", None),
    ("a=b.c", Some("P(a=b.c)")),
    ("f(a b)", None),
    ("f(a.b.)", None),
    ("h\u{e9}llo", None),
    ("f(-inf)", Some("f(P(-inf);)")),
    ("f(.5)", None),
    ("f(5.)", None),
    ("a..b", None),
    ("f(a)|g", None),
    ("f(a)|g()", Some("g(f(P(a););)")),
    ("f(a)\t|\tg()", Some("g(f(P(a););)")),
    ("f(a)\n|g()", Some("g(f(P(a););)")),
    ("f(a) |g(b=1)", None),
    ("template(f(a), 1, 2)", Some("T(f(P(a););I(1),I(2);)")),
    ("template(a, x=1, 2)", None),
    ("f(a . b)", None),
    ("f(x,a=b=c)", Some("f(P(x);a=P(b=c))")),
    ("f(1.5.3)", Some("f(P(1.5.3);)")),
    ("f(00012)", Some("f(I(12);)")),
    ("f(trUE)", Some("f(B(True);)")),
    ("f(true_)", Some("f(P(true_);)")),
    ("f(true$)", Some("f(P(true$);)")),
    ("f(Nonex)", Some("f(P(Nonex);)")),
    ("f(infinity)", Some("f(P(infinity);)")),
    ("f(\"a\nb\")", None),
    ("x.{a,{b,c}}", None),
    ("x.{}", None),
    ("a\\.b", Some("P(a.b)")),
    ("a\\=b", Some("P(a=b)")),
    ("\"abc\"", None),
    ("true", Some("P(true)")),
    ("-1", Some("P(-1)")),
    ("template(a.b, c.d)", Some("template(P(a.b),P(c.d);)")),
    (
        "aliasSub(app.requests, \"(^.*$)\", \"\\1 A\")",
        Some("aliasSub(P(app.requests),S((^.*$)),S(\\1 A);)"),
    ),
];

#[test]
fn targets_parse_as_graphite_webs_grammar_parses_them() {
    for (target, want) in CASES {
        assert_eq!(parsed(target).as_deref(), *want, "target {target:?}");
    }
}

#[test]
fn a_failed_parse_names_the_place() {
    let Err(Error::InvalidParameters(message)) = Expr::parse("sumSeries(a.b") else {
        panic!("must fail");
    };
    assert!(
        message.starts_with("Invalid parameters (could not parse target"),
        "{message}"
    );
    assert!(message.contains("character 13"), "{message}");
}

#[test]
fn deep_nesting_is_refused_not_overflowed() {
    let deep = format!("{}a{}", "f(".repeat(500), ")".repeat(500));
    assert!(Expr::parse(&deep).is_err());
    let fine = format!("{}a{}", "f(".repeat(40), ")".repeat(40));
    assert!(Expr::parse(&fine).is_ok());
}

#[test]
fn prefixes_parse_as_graphite_web_reads_names() {
    assert_eq!(
        parse_prefix("sumSeries(a.b.c)")
            .map(|e| canon(&e))
            .as_deref(),
        Some("sumSeries(P(a.b.c);)")
    );
    assert_eq!(
        parse_prefix("foo bar)").map(|e| canon(&e)).as_deref(),
        Some("P(foo)")
    );
    assert_eq!(parse_prefix(")"), None);
}

proptest::proptest! {
    #[test]
    fn no_input_panics(s in "\\PC{0,40}") {
        let _ = Expr::parse(&s);
        let _ = parse_prefix(&s);
    }

    #[test]
    fn grammar_like_input_never_panics(s in "[a-z(),.=\"' |{}\\\\0-9eE*-]{0,60}") {
        let _ = Expr::parse(&s);
    }
}

/// One case line `[target, canonical or null]`: this parser must agree.
fn check_grammar_case(line: &str) -> std::result::Result<(), String> {
    let (target, want): (String, Option<String>) =
        serde_json::from_str(line).map_err(|e| format!("bad case line {line:?}: {e}"))?;
    let got = parsed(&target);
    if got == want {
        Ok(())
    } else {
        Err(format!("{target:?}: want {want:?}, got {got:?}"))
    }
}

// Differential checks against graphite-web's grammar: on the cases recorded from it
// (`tests/oracle/grammar_cases.py 1 2000`), and on fresh ones it writes from the reference
// virtual environment as the test runs (another seed than the recorded ones).
crate::oracle_cases::differential_tests!(
    check_grammar_case,
    agrees_with_graphite_webs_grammar_on_the_recorded_cases("grammar.jsonl"),
    agrees_with_graphite_webs_grammar_run_now("grammar_cases.py", "2", "1000"),
);
