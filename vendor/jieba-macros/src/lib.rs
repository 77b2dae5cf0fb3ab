//! jieba-rs 0.7's HMM tables, generated from `hmm.model` at compile time.
//!
//! The stock 0.7.1 emits each state's emission probabilities as a
//! `phf::Map<&'static str, f64>`: one pointer per entry, 35,224 entries, so 35,224 relative
//! relocations that the dynamic loader applies to 206 pages at every process start, in
//! every binary that links jieba-rs, whether it cuts Chinese or not. Every key of the
//! model is one character, so this version keys the maps by `char` (no pointers in the
//! entries) behind a wrapper whose `get(&str)` is the one jieba-rs's `hmm.rs` calls. A
//! lookup of a string that is not exactly one character finds nothing, as it found no
//! key before: the cuts and tags are the same.

use proc_macro::TokenStream;

/// The tables `jieba_rs::hmm` expects: `INITIAL_PROBS`, `TRANS_PROBS` and `EMIT_PROBS`.
#[proc_macro]
pub fn generate_hmm_data(_input: TokenStream) -> TokenStream {
    hmm_data(include_str!("hmm.model"))
        .parse()
        .expect("the generated HMM tables are Rust")
}

fn hmm_data(model: &str) -> String {
    let mut output = String::new();
    let mut lines = model.lines().skip_while(|x| x.starts_with('#'));

    let init_probs = lines.next().expect("hmm.model has initial probabilities");
    output.push_str("#[allow(clippy::style)]\n");
    output.push_str("pub static INITIAL_PROBS: [f64; 4] = [");
    output.push_str(&init_probs.replace(' ', ", "));
    output.push_str("];\n\n");

    output.push_str("#[allow(clippy::style)]\n");
    output.push_str("pub static TRANS_PROBS: [[f64; 4]; 4] = [");
    for line in lines
        .by_ref()
        .skip_while(|x| x.starts_with('#'))
        .take_while(|x| !x.starts_with('#'))
    {
        output.push('[');
        output.push_str(&line.replace(' ', ", "));
        output.push_str("],\n");
    }
    output.push_str("];\n\n");

    output.push_str(EMIT_PROBS_TYPE);
    for (i, line) in lines.filter(|x| !x.starts_with('#')).enumerate() {
        let mut map = phf_codegen::Map::new();
        for word_prob in line.split(',') {
            let (word, prob) = word_prob
                .split_once(':')
                .expect("hmm.model emissions are char:probability");
            let mut chars = word.chars();
            let key = match (chars.next(), chars.next()) {
                (Some(c), None) => c,
                _ => panic!("hmm.model emits {word:?}, not one character"),
            };
            map.entry(key, prob);
        }
        output.push_str("#[allow(clippy::style)]\n");
        output.push_str(&format!(
            "pub static EMIT_PROB_{i}: EmitProbs = EmitProbs({});\n\n",
            map.build()
        ));
    }

    output.push_str("#[allow(clippy::style)]\n");
    output.push_str("pub static EMIT_PROBS: [&'static EmitProbs; 4] = [&EMIT_PROB_0, &EMIT_PROB_1, &EMIT_PROB_2, &EMIT_PROB_3];\n\n");
    output
}

/// The map type of the emission tables, with the lookup jieba-rs calls.
const EMIT_PROBS_TYPE: &str = r#"
/// One state's emission log-probabilities, by character.
pub struct EmitProbs(phf::Map<char, f64>);

impl EmitProbs {
    /// The probability of `word` when it is one character (every key is).
    #[inline]
    pub fn get(&self, word: &str) -> Option<&f64> {
        let mut chars = word.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => self.0.get(&c),
            _ => None,
        }
    }
}

"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_emission_of_the_model_is_in_its_table() {
        let model = include_str!("hmm.model");
        let out = hmm_data(model);
        let emissions: Vec<&str> = model
            .lines()
            .filter(|x| !x.starts_with('#'))
            .skip(5)
            .collect();
        assert_eq!(emissions.len(), 4);
        for (i, line) in emissions.iter().enumerate() {
            let start = out
                .find(&format!("pub static EMIT_PROB_{i}:"))
                .expect("each state has a table");
            let table = &out[start..start + out[start..].find(";\n").expect("ends")];
            let entries: std::collections::HashSet<&str> = table
                .lines()
                .filter_map(|l| l.trim().strip_prefix('('))
                .filter(|l| l.starts_with('\''))
                .collect();
            assert_eq!(entries.len(), line.split(',').count(), "state {i}");
            for word_prob in line.split(',') {
                let (word, prob) = word_prob.split_once(':').expect("char:prob");
                let key: char = word.parse().expect("one character");
                let entry = format!("{key:?}, {prob}),");
                assert!(
                    entries.contains(entry.as_str()),
                    "state {i}: {entry} missing"
                );
            }
        }
    }
}
