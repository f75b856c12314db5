//! Property tests of the pure parsers and arithmetic (`cargo test -p tally --lib`).
//!
//! Everything here runs on data a user or a stored hash can hand the module: argument
//! bytes, `_tally` markers, `_state` values, slot field names, encoded moments and
//! sketches. A panic on any of them would abort redis-server, so "never panics on
//! arbitrary bytes" is checked for every decoder, next to the round trips that the
//! command layer relies on (what it writes, it must read back identically).

use proptest::collection::vec;
use proptest::prelude::*;

use crate::args::{
    format_duration, parse_duration, parse_finite_f64, parse_i64, Args, MAX_DURATION_MS,
};
use crate::counter::model::{
    parse_resolution_text, parse_resolutions, parse_slot_field, slot_field, Counter, Resolution,
};
use crate::error::Error;
use crate::moments::Moments;
use crate::sketch::Sketch;
use crate::window::{
    effective_time, first_kept, leaves_at, slot_index, slot_start, slots_covering,
};

/// Every duration parse_duration accepts (up to 10,000 years) has a canonical text form
/// it accepts again.
const MAX_TEXT_DURATION: i64 = MAX_DURATION_MS;

/// Arbitrary bytes with a bias towards the characters the parsers look at.
fn parser_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..40),
        vec(
            prop::sample::select(b"0123456789-+:. msSMhHdDwWeEinfa\0\xff".to_vec()),
            0..30
        ),
    ]
}

/// Any finite double, from tiny to huge, either sign.
fn finite_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        -1e6f64..1e6,
        any::<f64>().prop_filter("finite", |v| v.is_finite() && v.abs() <= 1e100),
        Just(0.0),
        Just(-0.0),
        Just(1e-12),
        Just(f64::MIN_POSITIVE),
    ]
}

/// Cases per property: 512, or 20,000 for the soak run (`make test-long`, TALLY_LONG=1).
fn cases() -> u32 {
    match std::env::var("TALLY_LONG") {
        Ok(v) if !v.is_empty() && v != "0" => 20_000,
        _ => 512,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    // ------------------------------------------------------------------- args

    #[test]
    fn parse_i64_round_trips_display(i in any::<i64>()) {
        prop_assert_eq!(parse_i64(i.to_string().as_bytes()), Ok(i));
    }

    #[test]
    fn parse_i64_agrees_with_std_on_canonical_text(bytes in parser_bytes()) {
        // Whatever parse_i64 accepts is the canonical decimal form of that integer.
        if let Ok(i) = parse_i64(&bytes) {
            prop_assert_eq!(i.to_string().into_bytes(), bytes);
        }
    }

    #[test]
    fn duration_text_round_trips(ms in 1..=MAX_TEXT_DURATION) {
        let text = format_duration(ms);
        prop_assert_eq!(parse_duration(text.as_bytes()), Ok(ms), "{}", text);
        // Canonical: formatting what was parsed gives the same text again.
        prop_assert_eq!(format_duration(parse_duration(text.as_bytes()).unwrap_or(0)), text);
    }

    #[test]
    fn durations_with_units_parse(n in 1i64..1_000_000, unit in 0usize..6) {
        let (suffix, factor) = [("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000),
            ("d", 86_400_000), ("w", 604_800_000)][unit];
        // Up to 10,000 years; beyond, an invalid duration naming the text and the limit.
        let text = format!("{n}{suffix}");
        let want = if n * factor <= MAX_DURATION_MS {
            Ok(n * factor)
        } else {
            Err(Error::DurationHint(text.clone(), crate::args::DURATION_MOST))
        };
        prop_assert_eq!(parse_duration(text.as_bytes()), want);
        // Units are lower case only.
        let upper = format!("{n}{}", suffix.to_ascii_uppercase());
        prop_assert_eq!(
            parse_duration(upper.as_bytes()),
            Err(Error::DurationHint(upper.clone(), crate::args::DURATION_FORM))
        );
    }

    #[test]
    fn parsers_never_panic_on_arbitrary_bytes(bytes in parser_bytes()) {
        let _ = parse_i64(&bytes);
        let _ = parse_finite_f64(&bytes);
        match parse_duration(&bytes) {
            Ok(ms) => prop_assert!((1..=MAX_DURATION_MS).contains(&ms)),
            // The error names the user's text, lossily decoded.
            Err(e) => prop_assert!(matches!(
                e,
                Error::DurationHint(text, _) if text == String::from_utf8_lossy(&bytes)
            )),
        }
        if let Ok(f) = parse_finite_f64(&bytes) {
            prop_assert!(f.is_finite());
        }
        let _ = parse_resolutions(&[&bytes[..]]);
        let _ = parse_resolution_text(&String::from_utf8_lossy(&bytes));
        let _ = crate::stats::model::parse_keep(&bytes);
        let _ = crate::stats::model::parse_field(&bytes);
        let _ = crate::stats::model::Settings::from_marker(&bytes);
        let _ = crate::rank::model::Meta::from_fields(&bytes, None);
        let _ = crate::rank::model::Meta::from_fields(&bytes, Some(&bytes));
        let _ = crate::rank::model::has_hash_tag(&bytes);
        let _ = crate::rank::model::base_of_meta(&bytes);
    }

    #[test]
    fn cursor_never_panics(items in vec(parser_bytes(), 0..8), ops in vec(0u8..7, 0..16)) {
        let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
        let mut args = Args::new(&refs);
        for op in ops {
            let before = args.remaining();
            let consumed = match op {
                0 => args.next_bytes().is_ok(),
                1 => args.eat_keyword("AT"),
                2 => args
                    .next_keyword()
                    .map(|k| k.as_str() == k.as_str().to_ascii_uppercase())
                    .is_ok(),
                3 => args.next_i64().is_ok(),
                4 => args.next_f64().is_ok(),
                5 => args.next_duration().is_ok(),
                _ => {
                    prop_assert_eq!(args.is_done(), args.remaining() == 0);
                    false
                }
            };
            // A successful read consumes exactly one argument; nothing consumes more.
            prop_assert!(args.remaining() <= before);
            if consumed {
                prop_assert_eq!(args.remaining() + 1, before);
            }
        }
    }

    // ----------------------------------------------------------------- window

    #[test]
    fn window_functions_never_panic(t in any::<i64>(), len in any::<i64>(), n in any::<i64>()) {
        let _ = slot_index(t, len);
        let _ = slot_start(t, len);
        let _ = first_kept(t, len, n);
        let _ = leaves_at(t, len, n);
        let _ = slots_covering(t, len);
        let _ = effective_time(Some(t), len, n);
        let _ = effective_time(None, t, n);
    }

    #[test]
    fn kept_range_and_leaving_agree(
        now in -(1i64 << 50)..(1i64 << 50),
        len in 1i64..100_000_000,
        samples in 1i64..100_000,
    ) {
        let first = first_kept(now, len, samples);
        // `samples` slots are kept, ending with the slot containing now.
        prop_assert_eq!(slot_index(now, len) - first + 1, samples);
        // The oldest kept slot is still kept at now, and leaves exactly at leaves_at.
        let leave = leaves_at(first, len, samples);
        prop_assert!(leave > now);
        prop_assert_eq!(first_kept(leave - 1, len, samples), first);
        prop_assert_eq!(first_kept(leave, len, samples), first + 1);
        // The slot before it has already left.
        prop_assert!(leaves_at(first - 1, len, samples) <= now);
    }

    #[test]
    fn slots_are_epoch_aligned(t in -(1i64 << 60)..(1i64 << 60), len in 1i64..(1i64 << 40)) {
        let i = slot_index(t, len);
        let start = slot_start(i, len);
        prop_assert!(start <= t && t - start < len);
        prop_assert_eq!(start.rem_euclid(len), 0);
    }

    #[test]
    fn covering_is_ceil_division(w in 1i64..(1i64 << 50), len in 1i64..(1i64 << 30)) {
        let n = slots_covering(w, len);
        prop_assert!(n * len >= w && (n - 1) * len < w);
    }

    #[test]
    fn effective_time_clamps_or_refuses(
        now in -(1i64 << 60)..(1i64 << 60),
        ahead in any::<i64>(),
        max_future in 0i64..(1i64 << 40),
    ) {
        let at = now.saturating_add(ahead);
        match effective_time(Some(at), now, max_future) {
            Some(t) => prop_assert!(t <= now && (t == at || at - now <= max_future)),
            None => prop_assert!(at > now && at - now > max_future),
        }
    }

    // ---------------------------------------------------------------- counter

    #[test]
    fn slot_field_round_trips(res in 1..=MAX_TEXT_DURATION, index in any::<i64>()) {
        let field = slot_field(res, index);
        prop_assert_eq!(parse_slot_field(field.as_bytes()), Some((res, index)), "{}", field);
    }

    #[test]
    fn slot_field_parser_never_panics(bytes in parser_bytes()) {
        if let Some((res, index)) = parse_slot_field(&bytes) {
            prop_assert!(res > 0);
            // Whatever parses names the same slot as its canonical form.
            prop_assert_eq!(parse_slot_field(slot_field(res, index).as_bytes()), Some((res, index)));
        }
    }

    #[test]
    fn counter_from_stored_never_panics(
        marker in parser_bytes(),
        state in proptest::option::of(parser_bytes()),
    ) {
        let _ = Counter::from_stored(&marker, state.as_deref());
        let _ = crate::layout::is_family(&marker, crate::layout::COUNTER);
    }

    #[test]
    fn counter_state_garbage_never_panics(
        res in vec((1i64..100_000_000, 1i64..100_000), 1..6),
        state in parser_bytes(),
        reference in any::<i64>(),
        offsets in vec((any::<i64>(), 0i64..1_000_000_000), 0..8),
    ) {
        // Slot counts `n` stay plausible here: with counts near i64::MAX,
        // `Counter::stored_slots` overflows (a panic in debug builds, a wrapped sum in
        // release), reported separately.
        let Some(c) = counter_of(&res) else { return Ok(()) };
        let marker = c.marker();
        let _ = Counter::from_stored(marker.as_bytes(), Some(&state));
        // Well-formed but absurd numbers: offsets that overflow, negative counts.
        let mut text = reference.to_string();
        for (o, n) in &offsets {
            text.push_str(&format!(" {o}:{n}"));
        }
        if let Some(back) = Counter::from_stored(marker.as_bytes(), Some(text.as_bytes())) {
            prop_assert!(back.tracks.iter().all(|t| t.n >= 0));
            let _ = back.next_due();
            let _ = back.stored_slots();
        }
    }

    #[test]
    fn counter_marker_and_state_round_trip(
        res in vec((1i64..100_000_000, 1i64..100_000), 1..8),
        now in 0i64..(1i64 << 45),
    ) {
        let Some(mut c) = counter_of(&res) else { return Ok(()) };
        let marker = c.marker();
        let state = c.state(now);
        let back = Counter::from_stored(marker.as_bytes(), Some(state.as_bytes()));
        prop_assert_eq!(back.as_ref(), Some(&c), "{} / {}", marker, state);
        prop_assert!(crate::layout::is_family(marker.as_bytes(), crate::layout::COUNTER));
    }

    // ---------------------------------------------------------- stats, sketch

    #[test]
    fn sketch_decode_never_panics(bytes in vec(any::<u8>(), 0..64)) {
        if let Some(s) = Sketch::decode(&bytes) {
            // Documented as a strict inverse: accepted bytes re-encode identically.
            prop_assert_eq!(s.encode(), bytes);
            let _ = s.quantile(0.5);
            let _ = s.count();
        }
    }

    #[test]
    fn sketch_decode_of_mutated_encoding_never_panics(
        values in vec(finite_f64(), 1..50),
        flips in vec((any::<usize>(), any::<u8>()), 1..4),
    ) {
        let mut s = Sketch::new();
        for v in &values {
            s.add(*v);
        }
        let mut bytes = s.encode();
        prop_assert_eq!(Sketch::decode(&bytes), Some(s.clone()));
        for (at, x) in flips {
            let i = at % bytes.len();
            bytes[i] ^= x;
        }
        if let Some(t) = Sketch::decode(&bytes) {
            let _ = t.quantile(0.99);
        }
    }

    #[test]
    fn moments_decode_never_panics(bytes in parser_bytes()) {
        if let Some(m) = Moments::decode(&bytes) {
            prop_assert!(m.variance() >= 0.0 || m.variance().is_nan());
            let _ = m.stddev();
            let _ = m.sum();
        }
    }

    #[test]
    fn moments_decode_of_number_lists_never_panics(
        count in any::<u64>(),
        floats in vec(prop_oneof![finite_f64(), any::<f64>()], 0..9),
    ) {
        let mut text = count.to_string();
        for f in &floats {
            text.push(' ');
            text.push_str(&f.to_string());
        }
        if let Some(m) = Moments::decode(text.as_bytes()) {
            let _ = m.stddev();
        }
    }

    #[test]
    fn moments_encoding_round_trips(values in vec(finite_f64(), 0..40)) {
        let mut m = Moments::new();
        for v in &values {
            m.add(*v);
        }
        let binary = m.encode();
        let back = Moments::decode(&binary);
        prop_assert!(back.is_some(), "{:?}", binary);
        prop_assert_eq!(back.map(|b| b.encode()), Some(binary));
        let text = m.encode_text();
        let back = Moments::decode(text.as_bytes());
        prop_assert!(back.is_some(), "{}", text);
        prop_assert_eq!(back.map(|b| b.encode_text()), Some(text));
    }

    #[test]
    fn record_decode_never_panics(a in parser_bytes(), b in vec(any::<u8>(), 0..40)) {
        if let Some(r) = crate::stats::model::Record::decode(&a, &b) {
            let _ = r.summary();
        }
    }

    #[test]
    fn sketch_quantiles_within_one_percent(
        values in vec(prop_oneof![1e-6f64..1e9, -1e9f64..-1e-6], 1..200),
        q in 0.0f64..=1.0,
    ) {
        let mut s = Sketch::new();
        for v in &values {
            s.add(*v);
        }
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        let exact = sorted[rank - 1];
        let est = s.quantile(q).unwrap_or(f64::NAN);
        prop_assert!((est - exact).abs() <= 0.01 * exact.abs(), "q={} exact={} est={}", q, exact, est);
    }

    #[test]
    fn stats_field_and_marker_round_trip(
        start in any::<i64>(),
        period in 1i64..(1i64 << 40),
        keep in 1i64..=crate::stats::model::MAX_KEEP,
    ) {
        use crate::stats::model::{field, parse_field, Part, Settings};
        for part in [Part::Moments, Part::Sketch] {
            prop_assert_eq!(parse_field(field(start, part).as_bytes()), Some((start, part)));
        }
        if let Ok(s) = Settings::new(period, keep) {
            prop_assert_eq!(Settings::from_marker(s.marker().as_bytes()), Some(s));
            let now = 1i64 << 41;
            let first = s.first_kept(now);
            prop_assert!(s.is_kept(s.index(now), now));
            prop_assert!(!s.is_kept(first - 1, now));
        }
    }

    #[test]
    fn rank_meta_round_trips(
        slot in 1i64..100_000_000,
        slots in 1i64..=crate::rank::model::MAX_SLOTS,
        lo in -(1i64 << 50)..(1i64 << 50),
        span in -5i64..1000,
    ) {
        use crate::rank::model::{Meta, MetaLayout};
        // Bookkeeping spans are bounded: a meta whose span does not fit in two windows
        // is refused (tally never writes one), every other one round-trips, in the
        // current layout and in the four-number layout of older metas.
        let hi = lo + span;
        let mut m = Meta::new(slot * slots, slot);
        m.lo = lo;
        m.hi = hi;
        let fits = span < 2 * slots;
        prop_assert_eq!(
            Meta::from_fields(m.marker().as_bytes(), Some(m.slots_value().as_bytes())),
            fits.then_some((m, MetaLayout::Current))
        );
        let four = format!("rank {} {} {lo} {hi}", m.window, m.slot);
        prop_assert_eq!(
            Meta::from_fields(four.as_bytes(), None),
            fits.then_some((m, MetaLayout::FourNumberMarker))
        );
        let _ = m.next_due();
        let _ = m.pending_range(lo);
        let _ = m.live_range(hi);
    }
}

/// A counter with the given `(res_ms, samples)` pairs, if they are valid (distinct).
fn counter_of(res: &[(i64, i64)]) -> Option<Counter> {
    let tokens: Vec<String> = res
        .iter()
        .map(|(ms, samples)| format!("{}:{samples}", format_duration(*ms)))
        .collect();
    let resolutions: Vec<Resolution> = parse_resolutions(&tokens).ok()?;
    Some(Counter::new(resolutions))
}
