//! Unit tests of the argument parsers and formatters.

#[test]
fn key_counts_are_one_to_max() {
    use super::parse_key_count;
    assert_eq!(parse_key_count(b"1", 1000), Ok(1));
    assert_eq!(parse_key_count(b"1000", 1000), Ok(1000));
    assert_eq!(parse_key_count(b"1001", 1000), Err(Error::Syntax));
    assert_eq!(parse_key_count(b"0", 1000), Err(Error::Syntax));
    assert_eq!(parse_key_count(b"-1", 1000), Err(Error::Syntax));
    assert_eq!(parse_key_count(b"x", 1000), Err(Error::NotInteger));
}

use super::*;

/// Keywords read as the old `String` did: upper-cased ASCII, at most 32 bytes, and
/// an argument that is not UTF-8 matching no option.
#[test]
fn keywords_upper_case_on_the_stack() {
    let keyword = |item: &[u8]| {
        let items = [item];
        Args::new(&items)
            .next_keyword()
            .map(|k| k.as_str().to_string())
    };
    assert_eq!(keyword(b"withScores"), Ok("WITHSCORES".to_string()));
    assert_eq!(keyword(b"at"), Ok("AT".to_string()));
    assert_eq!(keyword(b""), Ok(String::new()));
    assert_eq!(
        keyword(b"\xc3\xa9t\xc3\xa9"),
        Ok("\u{e9}T\u{e9}".to_string())
    );
    assert_eq!(keyword(&[b'a'; 32]), Ok("A".repeat(32)));
    assert_eq!(keyword(&[b'a'; 33]), Err(Error::Syntax));
    assert_eq!(keyword(b"\xff\xfeAT"), Ok("\u{FFFD}".to_string()));
    assert_eq!(Args::new(&[]).next_keyword(), Err(Error::Syntax));
}

#[test]
fn integers_print_as_redis_writes_them() {
    for v in [0, 1, -1, 9, 10, -10, 1234567, i64::MAX, i64::MIN] {
        let mut out = b"x".to_vec();
        push_i64(&mut out, v);
        assert_eq!(out, format!("x{v}").into_bytes());
        assert_eq!(parse_i64(out.get(1..).unwrap_or(&[])), Ok(v));
    }
}

#[test]
fn integers_follow_redis_rules() {
    assert_eq!(parse_i64(b"0"), Ok(0));
    assert_eq!(parse_i64(b"-42"), Ok(-42));
    assert_eq!(parse_i64(b"9223372036854775807"), Ok(i64::MAX));
    assert_eq!(parse_i64(b"-9223372036854775808"), Ok(i64::MIN));
    for bad in [
        &b""[..],
        b"-",
        b"+1",
        b"01",
        b"1.5",
        b" 1",
        b"9223372036854775808",
        b"1e3",
        b"-0",
        b"\x00",
    ] {
        assert_eq!(parse_i64(bad), Err(Error::NotInteger), "{bad:?}");
    }
}

#[test]
fn floats_must_be_finite_numbers() {
    assert_eq!(parse_finite_f64(b"1.5"), Ok(1.5));
    assert_eq!(parse_finite_f64(b"-1e9"), Ok(-1e9));
    for bad in [
        &b"inf"[..],
        b"-inf",
        b"nan",
        b"NaN",
        b"",
        b"abc",
        b" 1",
        b"1e999",
    ] {
        assert_eq!(parse_finite_f64(bad), Err(Error::NotFloat), "{bad:?}");
    }
}

#[test]
fn durations_with_and_without_units() {
    assert_eq!(parse_duration(b"500ms"), Ok(500));
    assert_eq!(parse_duration(b"1500"), Ok(1500));
    assert_eq!(parse_duration(b"5s"), Ok(5_000));
    assert_eq!(parse_duration(b"24h"), Ok(86_400_000));
    assert_eq!(parse_duration(b"180d"), Ok(15_552_000_000));
    assert_eq!(parse_duration(b"2w"), Ok(1_209_600_000));
    for bad in [
        &b"5M"[..],
        b"7MS",
        b"3mS",
        b"5S",
        b"1H",
        b"5mins",
        b"1hour",
        b"ms",
        b"5sm",
        b"5mm",
        b"m5",
        b"0",
        b"0s",
        b"-5s",
        b"5x",
        b"s",
        b"",
        b"5 s",
        b"1.5s",
    ] {
        assert_eq!(
            parse_duration(bad),
            Err(Error::DurationHint(
                String::from_utf8_lossy(bad).into_owned(),
                DURATION_FORM
            )),
            "{bad:?}"
        );
    }
    assert_eq!(
        parse_duration(b"5x").unwrap_err().to_string(),
        "ERR invalid duration '5x': a duration is a positive integer of milliseconds or \
         with a unit ms, s, m, h, d or w in lower case (500ms, 5s, 5m, 24h, 7d, 2w)"
    );
    assert_eq!(
        parse_duration(b"999999999999999999w"),
        Err(Error::DurationHint(
            "999999999999999999w".into(),
            DURATION_MOST
        ))
    );
}

/// Durations stop at 10,000 years, timestamps at 2^53, whatever the unit.
#[test]
fn edges_of_time() {
    assert_eq!(parse_duration(b"3652500d"), Ok(MAX_DURATION_MS));
    assert_eq!(parse_duration(b"315576000000000"), Ok(MAX_DURATION_MS));
    assert_eq!(parse_duration(b"315576000000000ms"), Ok(MAX_DURATION_MS));
    assert_eq!(parse_duration(b"87660000h"), Ok(MAX_DURATION_MS));
    for bad in [
        &b"3652501d"[..],
        b"315576000000001",
        b"106751991167d",
        b"521786w",
        b"999999999999999999",
        b"5259600001m",
    ] {
        assert_eq!(
            parse_duration(bad),
            Err(Error::DurationHint(
                String::from_utf8_lossy(bad).into_owned(),
                DURATION_MOST
            )),
            "{bad:?}"
        );
    }
    assert_eq!(parse_timestamp(b"0"), Ok(0));
    assert_eq!(
        parse_timestamp(b"9007199254740991"),
        Ok(TIMESTAMP_LIMIT - 1)
    );
    for outside in [
        &b"-1"[..],
        b"-100000000000000",
        b"9007199254740992",
        b"9223372036854775807",
        b"-9223372036854775808",
    ] {
        assert_eq!(
            parse_timestamp(outside),
            Err(Error::OutsideKeptRange),
            "{outside:?}"
        );
    }
    assert_eq!(parse_timestamp(b"1.5"), Err(Error::NotInteger));
    assert_eq!(parse_timestamp(b"x"), Err(Error::NotInteger));
    let items: Vec<&[u8]> = vec![b"12", b"-12"];
    let mut args = Args::new(&items);
    assert_eq!(args.next_timestamp(), Ok(12));
    assert_eq!(args.next_timestamp(), Err(Error::OutsideKeptRange));
    assert_eq!(args.next_timestamp(), Err(Error::Syntax));
}

/// The `match` of one-letter units and the table of units agree, in lower case only.
#[test]
fn letter_units_match_the_table() {
    for (suffix, ms) in UNITS {
        let &[letter] = suffix.as_bytes() else {
            continue;
        };
        assert_eq!(letter_unit_ms(letter), Some(ms), "{suffix}");
        assert_eq!(
            letter_unit_ms(letter.to_ascii_uppercase()),
            None,
            "{suffix}"
        );
        assert_eq!(parse_duration(format!("3{suffix}").as_bytes()), Ok(3 * ms));
    }
    let letters = UNITS.iter().filter(|(suffix, _)| suffix.len() == 1).count();
    let matched = (0..=u8::MAX)
        .filter(|&b| letter_unit_ms(b).is_some())
        .count();
    assert_eq!(matched, letters, "no unit beyond the table's");
}

#[test]
fn canonical_duration_labels() {
    assert_eq!(format_duration(500), "500ms");
    assert_eq!(format_duration(1000), "1s");
    assert_eq!(format_duration(60_000), "1m");
    assert_eq!(format_duration(90_000), "90s");
    assert_eq!(format_duration(86_400_000), "1d");
    assert_eq!(format_duration(604_800_000), "1w");
    for ms in [1, 999, 1001, 5_000, 300_000, 3_600_000, 18_000_000] {
        assert_eq!(parse_duration(format_duration(ms).as_bytes()), Ok(ms));
    }
}

#[test]
fn values_run_until_the_first_option_keyword() {
    let items: Vec<&[u8]> = vec![b"5s", b"at", b"1m", b"AT", b"10"];
    let mut args = Args::new(&items);
    // The first value is taken whatever it is: a bad one is an error of its own kind.
    assert_eq!(args.values_until(1, &["AT"]), &items[..1]);
    assert!(args.eat_keyword("AT"));
    assert_eq!(args.values_until(0, &["AT", "REPORT"]), &items[2..3]);
    assert!(args.eat_keyword("at"));
    assert_eq!(args.values_until(0, &["AT"]), &items[4..]);
    assert!(args.is_done());
    assert_eq!(args.values_until(1, &["AT"]), &[] as &[&[u8]]);
    let only: Vec<&[u8]> = vec![b"WINDOW", b"1h"];
    assert_eq!(
        Args::new(&only).values_until(0, &["WINDOW"]),
        &[] as &[&[u8]]
    );
    assert_eq!(Args::new(&only).values_until(1, &["WINDOW"]), &only[..]);
}

#[test]
fn floats_print_shortest_and_read_back_exactly() {
    for x in [
        0.0,
        -0.0,
        1.5,
        -2.25,
        1e-7,
        123456.789,
        1e300,
        f64::MIN_POSITIVE,
        0.1,
    ] {
        let mut out = String::new();
        push_f64(&mut out, x);
        assert_eq!(out.parse::<f64>(), Ok(x), "{out}");
        assert!(out.len() <= 24, "{out}");
    }
    let mut out = String::new();
    push_f64(&mut out, 1e300);
    assert_eq!(out, "1e300");
}

#[test]
fn cursor_separates_missing_from_bad() {
    let raw: Vec<&[u8]> = vec![b"AT", b"12", b"at"];
    let mut args = Args::new(&raw);
    assert!(args.eat_keyword("at"));
    assert_eq!(args.next_i64(), Ok(12));
    assert_eq!(
        args.next_keyword().map(|k| k.as_str().to_string()),
        Ok("AT".to_string())
    );
    assert_eq!(args.next_i64(), Err(Error::Syntax));
    assert!(args.is_done());
}
