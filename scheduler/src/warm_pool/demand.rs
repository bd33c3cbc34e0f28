//! How many of the warm pool's containers each image gets: shares in proportion to the jobs
//! of each TeX Live year the scheduler ran lately, the default year always at least one, so
//! that the year most jobs use starts at once and a year nobody asks for holds no memory.

use std::collections::BTreeMap;

/// How much of the demand remains after each job: the last few dozen jobs count.
const DECAY: f64 = 0.95;

/// The recent jobs of each year, each older job counting a little less.
pub struct Demand {
    default: String,
    recent: BTreeMap<String, f64>,
}

impl Demand {
    /// No jobs yet for `years`: the pool goes to `default`.
    pub fn new(years: &[String], default: &str) -> Demand {
        Demand {
            default: default.to_string(),
            recent: years.iter().map(|year| (year.clone(), 0.0)).collect(),
        }
    }

    /// A job of `year` started.
    pub fn record(&mut self, year: &str) {
        for count in self.recent.values_mut() {
            *count *= DECAY;
        }
        if let Some(count) = self.recent.get_mut(year) {
            *count += 1.0;
        }
    }

    /// How many of `size` containers each year gets: its share of the recent jobs, rounded by
    /// largest remainder, with at least one for the default year.
    pub fn targets(&self, size: usize) -> BTreeMap<String, usize> {
        let total: f64 = self.recent.values().sum();
        let shares: Vec<(&String, f64)> = self
            .recent
            .iter()
            .map(|(year, count)| match total > 0.0 {
                true => (year, size as f64 * count / total),
                false => (
                    year,
                    if *year == self.default {
                        size as f64
                    } else {
                        0.0
                    },
                ),
            })
            .collect();
        let mut targets: BTreeMap<String, usize> = shares
            .iter()
            .map(|(year, share)| ((*year).clone(), share.floor() as usize))
            .collect();
        let mut by_remainder = shares.clone();
        by_remainder.sort_by(|a, b| (b.1 - b.1.floor()).total_cmp(&(a.1 - a.1.floor())));
        let left = size - targets.values().sum::<usize>();
        for (year, _) in by_remainder.into_iter().take(left) {
            *targets.get_mut(year).expect("a year of the map") += 1;
        }
        if size > 0 && targets.get(&self.default) == Some(&0) {
            let largest = targets
                .iter()
                .max_by_key(|(_, target)| **target)
                .map(|(year, _)| year.clone())
                .expect("size > 0 went to some year");
            *targets.get_mut(&largest).expect("a year of the map") -= 1;
            *targets.get_mut(&self.default).expect("the default's year") += 1;
        }
        targets
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn years() -> Vec<String> {
        ["2022", "2024", "2026"].map(String::from).to_vec()
    }

    #[test]
    fn without_jobs_the_pool_is_the_default_year_s() {
        let demand = Demand::new(&years(), "2024");
        assert_eq!(demand.targets(4)["2024"], 4);
        assert_eq!(demand.targets(4)["2022"], 0);
        assert_eq!(demand.targets(0).values().sum::<usize>(), 0);
    }

    #[test]
    fn the_pool_follows_recent_demand_but_always_keeps_one_of_the_default() {
        let mut demand = Demand::new(&years(), "2024");
        for _ in 0..30 {
            demand.record("2022");
        }
        let targets = demand.targets(4);
        assert_eq!(
            (targets["2022"], targets["2024"], targets["2026"]),
            (3, 1, 0)
        );
        for _ in 0..3 {
            demand.record("2026");
            demand.record("2022");
        }
        let targets = demand.targets(6);
        assert_eq!(targets.values().sum::<usize>(), 6);
        assert!(
            targets["2022"] > targets["2026"] && targets["2026"] >= 1,
            "{targets:?}"
        );
        assert!(targets["2024"] >= 1);
    }
}
