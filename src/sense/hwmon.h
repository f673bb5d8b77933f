/* PLACEHOLDER: replaced by the hwmon sampler. */
#pragma once

#include "sense/sample.h"
#include "sense/sampler.h"

extern const struct sampler hwmon_sampler;
